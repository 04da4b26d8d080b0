#!/usr/bin/env bash
# Runs docs/deploy.md on loopback, so that the guide cannot drift from the code:
#
#   scripts/guide.sh        # alone, or from scripts/test.sh after `services.sh up`
#
# What it checks and runs, in the guide's order:
#   - every file under deploy/ (but the Prometheus rules) appears verbatim in
#     docs/deploy.md, and every deploy/ path the guide names exists;
#   - step 1: the guide's SQL, on the PostgreSQL of scripts/services.sh
#     (TIDEWAY_TEST_POSTGRES_URL), for a role and database of this run's own,
#     dropped at the end;
#   - step 3's `cargo install` line, with `--debug` added (a debug build keeps
#     the test command fast; the guide builds a release one), into a temporary root;
#     with TIDEWAY_BIN set (scripts/test.sh sets it), that binary, the test
#     command's one build of the same sources, is installed there instead;
#   - the systemd units, checked by `systemd-analyze verify` where it exists,
#     then run without systemd: their ExecStart lines, EnvironmentFile files and
#     *Directory settings are read from deploy/systemd, never retyped here;
#   - step 2: six Redis Cluster nodes from redis-cluster@.service and
#     cluster-node.conf, and the guide's `redis-cli --cluster create` line;
#   - step 3: two tideway nodes from tideway@.service and the env files;
#   - step 4: nginx (installed with apt-get if missing) as a private instance
#     whose nginx.conf includes the guide's tideway.conf; `nginx -t` first;
#   - step 5's and 6's curl blocks as written; then, through the balancer, a
#     follow graph, posts, a home page that is exactly those posts, an
#     idempotent retry, a node killed with -9 (pages and posts still answer),
#     the node started again, and a Redis primary killed (its replica takes over).
# Every copied file lives in a temporary directory, with the guide's ports and
# paths replaced by free ports and paths under it. Whatever it started is
# stopped on exit, failed or not; a component that failed has its log printed.
set -euo pipefail
cd "$(dirname "$0")/.."
GUIDE=docs/deploy.md
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tideway/target}"

START=$(date +%s)
T=$(mktemp -d /tmp/tideway-guide.XXXXXX)
chmod 755 "$T" # services run under their units' users must reach their files
declare -A PID=() LOG=() LOG2=() # component -> pid, its output, the log file its unit names
KILLED=" "                # components stopped on purpose (not failures)
WATCH=()                  # logs printed if the current step fails
DB_ADMIN_URL='' DB_NAME='' OWN_SERVICES=''

say() { echo "guide: $*"; }
step() {
    WATCH=()
    echo "== guide [$(($(date +%s) - START)) s]: $*"
}
fail() {
    echo "guide: FAILED: $*" >&2
    exit 1
}

alive() { # pid: running (a zombie is not)
    local s
    s=$(ps -o stat= -p "$1" 2>/dev/null) && [[ $s != Z* ]]
}

show_log() { # file
    [ -s "$1" ] || return 0
    echo "---- $1 (last 40 lines)" >&2
    tail -n 40 "$1" >&2
    echo "----" >&2
}

cleanup() {
    local rc=$? name pid shown=" " f
    set +e
    trap - INT TERM
    if [ "$rc" != 0 ] && [ "$rc" != 130 ]; then
        # The logs of this step, and of every component that died unasked.
        for f in "${WATCH[@]}"; do
            show_log "$f"
            shown+="$f "
        done
        for name in "${!PID[@]}"; do
            if [[ $KILLED != *" $name "* ]] && ! alive "${PID[$name]}"; then
                echo "guide: $name is not running" >&2
                for f in "${LOG[$name]}" "${LOG2[$name]:-}"; do
                    [ -n "$f" ] && [[ $shown != *" $f "* ]] && show_log "$f"
                    shown+="$f "
                done
            fi
        done
    fi
    for name in "${!PID[@]}"; do
        alive "${PID[$name]}" && kill -TERM "${PID[$name]}" 2>/dev/null
    done
    for _ in $(seq 1 150); do
        pid=
        for name in "${!PID[@]}"; do alive "${PID[$name]}" && pid=${PID[$name]}; done
        [ -z "$pid" ] && break
        sleep 0.1
    done
    for name in "${!PID[@]}"; do
        if alive "${PID[$name]}"; then
            echo "guide: $name did not stop on SIGTERM within 15 s: SIGKILL" >&2
            kill -KILL "${PID[$name]}" 2>/dev/null
        fi
        wait "${PID[$name]}" 2>/dev/null
    done
    if [ -n "$DB_NAME" ]; then
        psql "$DB_ADMIN_URL" -qc "drop database if exists $DB_NAME with (force)" -c "drop role if exists $DB_NAME" >/dev/null 2>&1 ||
            echo "guide: could not drop the database and role $DB_NAME" >&2
    fi
    # services.sh up started a Redis Cluster for this run: only that is
    # stopped (a whole `services.sh down` would also drop every tw_test_
    # database, those of a test run going on beside this one too).
    [ -n "$OWN_SERVICES" ] && env -i PATH="$PATH" TIDEWAY_TEST_CLUSTER_DIR="${TIDEWAY_TEST_CLUSTER_DIR:-}" scripts/services.sh down
    if [ -n "${GUIDE_KEEP:-}" ]; then
        say "kept $T (GUIDE_KEEP)"
    else
        rm -rf "$T"
    fi
    if [ "$rc" = 0 ]; then
        say "the guide ran as written, in $(($(date +%s) - START)) s"
    else
        say "failed after $(($(date +%s) - START)) s; everything it started is stopped"
    fi
    exit "$rc"
}
trap cleanup EXIT
trap 'echo "guide: interrupted" >&2; exit 130' INT TERM

# ---------------------------------------------------------------- the guide's text

# The fenced block after the line `<!-- guide.sh: NAME -->`.
doc_block() { # name
    local out
    out=$(awk -v m="<!-- guide.sh: $1 -->" '
        $0 == m { found = 1; next }
        found == 1 && /^```/ { found = 2; next }
        found == 2 && /^```/ { exit }
        found == 2 { print }' "$GUIDE")
    [ -n "$out" ] || fail "$GUIDE has no block marked '<!-- guide.sh: $1 -->'"
    printf '%s\n' "$out"
}

# The one line of a block that starts with a prefix.
block_line() { # name text
    local block lines
    block=$(doc_block "$1")
    lines=$(grep -cF -- "$2" <<<"$block" || true)
    [ "$lines" = 1 ] || fail "block '$1' of $GUIDE should have one line with '$2', not $lines"
    grep -F -- "$2" <<<"$block"
}

# The values of KEY= lines of a unit file.
unit_values() { # file key
    sed -n "s/^$2=//p" "$1"
}

# ---------------------------------------------------------------- substitutions

port_free() { # port
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

TAKEN=" " # ports given out by this run (with their +offset)
free_port() { # variable [offset that must be free too]: not in a subshell (TAKEN)
    local low try bus
    # Below the ephemeral range (outgoing connections take those at any moment).
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    for _ in $(seq 1 200); do
        try=$((10000 + RANDOM % (low - 20000)))
        bus=$((try + ${2:-0}))
        if [[ $TAKEN != *" $try "* && $TAKEN != *" $bus "* ]] && port_free "$try" && port_free "$bus"; then
            TAKEN+="$try $bus "
            printf -v "$1" '%s' "$try"
            return
        fi
    done
    fail "no free port found"
}

# The guide's ports and paths, and what they are in this run.
SUBST=()
subst_add() { SUBST+=(-e "$1"); }

render() { # sed over stdin with every substitution
    sed -E "${SUBST[@]}"
}

render_file() { # source destination [mode]
    mkdir -p "$(dirname "$2")"
    render <"$1" >"$2"
    chmod "${3:-644}" "$2"
}

# Reads a systemd EnvironmentFile (KEY=VALUE lines, # and ; comments, a value
# optionally in single or double quotes) into ENVV as KEY=VALUE words.
read_env_file() { # file
    local line key value
    [ -f "$1" ] || fail "EnvironmentFile $1 does not exist"
    while IFS= read -r line || [ -n "$line" ]; do
        line="${line#"${line%%[![:space:]]*}"}"
        [[ -z $line || $line == \#* || $line == \;* ]] && continue
        [[ $line == *=* ]] || fail "$1: not KEY=VALUE: $line"
        key=${line%%=*}
        value=${line#*=}
        if [[ $value =~ ^\'(.*)\'$ || $value =~ ^\"(.*)\"$ ]]; then
            value=${BASH_REMATCH[1]}
        elif [[ $value == *[\'\"\\]* ]]; then
            fail "$1: this script reads whole-quoted values only: $line"
        fi
        ENVV+=("$key=$value")
    done <"$1"
}

# Starts instance INST of a rendered unit file the way systemd would: its
# directories, its environment files, its user, its ExecStart, in the
# background; stdout and stderr (systemd's journal) go to a log.
start_unit() { # name unit-file instance
    local name=$1 unit=$2 inst=$3 exec line d user group dyn as=() dirs=() cwd
    exec=$(unit_values "$unit" ExecStart)
    if [ -z "$exec" ] || [ "$(printf '%s\n' "$exec" | wc -l)" != 1 ]; then
        fail "$unit: one ExecStart= expected"
    fi
    [[ $exec == [/]* ]] || fail "$unit: ExecStart= with a prefix (- @ + !) is not run by this script"
    exec=${exec//%i/$inst}
    [[ $exec != *%* ]] || fail "$unit: a specifier other than %i in ExecStart: $exec"
    read -r -a argv <<<"$exec"
    ENVV=()
    while IFS= read -r line; do
        [ -n "$line" ] || continue
        line=${line//%i/$inst}
        [[ $line == -* ]] && { line=${line#-}; [ -f "$line" ] || continue; }
        read_env_file "$line"
    done < <(unit_values "$unit" EnvironmentFile)
    user=$(unit_values "$unit" User)
    group=$(unit_values "$unit" Group)
    dyn=$(unit_values "$unit" DynamicUser)
    for d in StateDirectory:var/lib LogsDirectory:var/log RuntimeDirectory:run CacheDirectory:var/cache; do
        while IFS= read -r line; do
            [ -n "$line" ] && dirs+=("$T/${d#*:}/${line//%i/$inst}")
        done < <(unit_values "$unit" "${d%%:*}")
    done
    [ ${#dirs[@]} = 0 ] || mkdir -p "${dirs[@]}"
    # The unit's user, where this runs as root (as systemd does).
    if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
        if [ "$dyn" = yes ]; then
            as=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups)
        elif [ -n "$user" ] && id "$user" >/dev/null 2>&1; then
            as=(setpriv --reuid="$user" --regid="${group:-$user}" --init-groups)
            [ ${#dirs[@]} = 0 ] || chown "$user:${group:-$user}" "${dirs[@]}"
        fi
    fi
    # systemd's working directory is /; an empty one here shows whether the
    # service writes anything into it.
    cwd="$T/cwd/$name"
    mkdir -p "$cwd"
    LOG[$name]="$T/log/$name.log"
    mkdir -p "$T/log"
    (cd "$cwd" && exec env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin LANG=C.UTF-8 \
        "${ENVV[@]}" "${as[@]}" "${argv[@]}") >>"${LOG[$name]}" 2>&1 &
    PID[$name]=$!
    KILLED=${KILLED/ $name / }
}

# Kills a component with a signal, on purpose.
kill_component() { # name signal
    KILLED+="$1 "
    kill "-$2" "${PID[$1]}"
    wait "${PID[$1]}" 2>/dev/null || true
}

wait_up() { # component seconds command...: polls until it succeeds, while the component runs
    local name=$1 secs=$2
    shift 2
    for _ in $(seq 1 $((secs * 5))); do
        alive "${PID[$name]}" || fail "$name exited"
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    fail "$name does not answer (waited $secs s)"
}

wait_until() { # seconds what command...: polls every 0.2 s
    local secs=$1 what=$2
    shift 2
    for _ in $(seq 1 $((secs * 5))); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    fail "$what (waited $secs s)"
}

# ---------------------------------------------------------------- HTTP

STATUS='' BODY=''
api() { # method url [json]: sets STATUS and BODY
    local args=(-s -o "$T/body" -w '%{http_code}' --max-time 15 -X "$1" "$2" -H "Authorization: Bearer $KEY")
    [ -n "${3:-}" ] && args+=(-H 'content-type: application/json' -d "$3")
    STATUS=$(curl "${args[@]}") || STATUS="no answer"
    BODY=$(cat "$T/body" 2>/dev/null || true)
}
expect() { # status what
    [ "$STATUS" = "$1" ] || fail "$2: expected $1, got $STATUS: $BODY"
}
post_item() { # author text [idempotency key]: prints the id
    local body
    body=$(jq -nc --arg a "$1" --arg t "$2" --arg k "${3:-}" \
        '{author: $a, body: {text: $t}} + (if $k == "" then {} else {idempotency_key: $k} end)')
    api POST "$B/v1/items" "$body"
    expect 201 "POST /v1/items by $1"
    jq -r .item.id <<<"$BODY"
}
home_ids() { # user: the item ids of the first page, newest first, as a JSON array
    api GET "$B/v1/users/$1/home?limit=100"
    expect 200 "GET /v1/users/$1/home"
    jq -c '[.entries[].item.id]' <<<"$BODY"
}
wait_home() { # user expected-json-array: until the first page is exactly it (10 s)
    local got
    for _ in $(seq 1 50); do
        got=$(home_ids "$1")
        [ "$got" = "$2" ] && return 0
        sleep 0.2
    done
    fail "the home of $1 is $got, not $2"
}

# ================================================================= the run

step "the guide's files: every file of deploy/ is shown in $GUIDE as it is"
doc=$(cat "$GUIDE")
while IFS= read -r f; do
    content=$(cat "$f")
    [[ $doc == *"$content"* ]] || fail "$f is not shown verbatim in $GUIDE: show it there as it is (or change both)"
    say "  $f: shown"
done < <(find deploy -type f ! -path 'deploy/prometheus/*' | sort)
while IFS= read -r f; do
    [ -e "$f" ] || fail "$GUIDE names $f, which does not exist"
done < <(grep -oE 'deploy/[A-Za-z0-9_.@/-]*[A-Za-z0-9_]' "$GUIDE" | sort -u)

step "engines and tools"
if [ -z "${TIDEWAY_TEST_POSTGRES_URL:-}" ]; then
    say "TIDEWAY_TEST_POSTGRES_URL is not set: starting the engines with scripts/services.sh up"
    engines="$(scripts/services.sh up)" || fail "the engines could not be started"
    eval "$engines"
    OWN_SERVICES=1
fi
for tool in curl jq psql redis-server redis-cli cargo; do
    command -v "$tool" >/dev/null || fail "$tool is missing"
done
if ! command -v nginx >/dev/null && [ ! -x /usr/sbin/nginx ]; then
    [ "$(id -u)" = 0 ] || fail "nginx is missing: apt-get install nginx, or run as root"
    say "installing nginx with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx >"$T/apt.log" 2>&1 ||
        { apt-get update -q >>"$T/apt.log" 2>&1 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q nginx >>"$T/apt.log" 2>&1; } ||
        { show_log "$T/apt.log"; fail "could not install nginx"; }
fi
NGINX=$(command -v nginx || echo /usr/sbin/nginx)
say "  $("$NGINX" -v 2>&1), $(redis-server --version | cut -d' ' -f1-3), $(psql --version)"

# This run's ports: the guide's Redis ports (and their cluster bus, +10000),
# its two nodes' ports and nginx's.
GUIDE_REDIS_PORTS=(7101 7102 7103 7104 7105 7106)
REDIS_PORTS=()
for g in "${GUIDE_REDIS_PORTS[@]}"; do
    free_port port 10000
    REDIS_PORTS+=("$port")
    subst_add "s/\\b$g\\b/$port/g"
done
free_port N1
free_port N2
free_port NG
subst_add "s/\\b8081\\b/$N1/g"
subst_add "s/\\b8082\\b/$N2/g"
subst_add "s/^([[:space:]]*listen) 80 /\\1 127.0.0.1:$NG /"
for path in /etc/tideway /etc/redis /etc/nginx /var/lib/redis-cluster /var/log/redis-cluster /run/redis-cluster /usr/local; do
    subst_add "s#(^|[[:space:]=\"'])$path#\\1$T$path#g"
done
say "  Redis on ${REDIS_PORTS[*]} (the guide's ${GUIDE_REDIS_PORTS[*]}), nodes on $N1 and $N2, nginx on $NG"

# The database: the guide's URL names tideway's role and database on the
# machine's PostgreSQL; this run's are its own, on the test PostgreSQL.
DB_ADMIN_URL=$TIDEWAY_TEST_POSTGRES_URL
[[ $DB_ADMIN_URL =~ ^postgres(ql)?://([^@/]*@)?([^:/]+)(:([0-9]+))?/ ]] ||
    fail "cannot read the host and port of TIDEWAY_TEST_POSTGRES_URL"
PG_HOST=${BASH_REMATCH[3]} PG_PORT=${BASH_REMATCH[5]:-5432}
DB_NAME="tw_guide_$$_$RANDOM"
GUIDE_DB_URL='postgres://tideway:change-me@127.0.0.1:5432/tideway'
grep -qF "TIDEWAY_STORAGE__URL=$GUIDE_DB_URL" deploy/tideway/tideway.env ||
    fail "deploy/tideway/tideway.env no longer has TIDEWAY_STORAGE__URL=$GUIDE_DB_URL: update scripts/guide.sh with it"
subst_add "s#$GUIDE_DB_URL#postgres://$DB_NAME:change-me@$PG_HOST:$PG_PORT/$DB_NAME#g"

# Copies of deploy/, where the guide puts them, under $T.
render_file deploy/redis/cluster-node.conf "$T/etc/redis/cluster-node.conf" 640
id redis >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && chgrp redis "$T/etc/redis/cluster-node.conf"
render_file deploy/systemd/redis-cluster@.service "$T/etc/systemd/system/redis-cluster@.service"
render_file deploy/systemd/tideway@.service "$T/etc/systemd/system/tideway@.service"
for f in deploy/tideway/*.env; do
    render_file "$f" "$T/etc/tideway/$(basename "$f")" 600
done
render_file deploy/nginx/tideway.conf "$T/etc/nginx/conf.d/tideway.conf"
# Nothing of the guide's own addresses may be left: a port not moved here
# would be a real port of this machine.
ours=" ${REDIS_PORTS[*]} $N1 $N2 $NG $PG_PORT "
while IFS= read -r a; do
    [[ $ours == *" ${a##*:} "* ]] || fail "the rendered files name $a, a port this script does not move: add it to scripts/guide.sh"
done < <(grep -rhoE '127\.0\.0\.1:[0-9]+' "$T/etc" | sort -u)
grep -q "listen 127.0.0.1:$NG " "$T/etc/nginx/conf.d/tideway.conf" ||
    fail "deploy/nginx/tideway.conf has no 'listen 80 ' line: update scripts/guide.sh"

step "step 1: the database (the guide's SQL, as role and database $DB_NAME)"
sql=$(doc_block database | awk '/<<.SQL.$/ { on = 1; next } /^SQL$/ { on = 0 } on')
[ -n "$sql" ] || fail "the database block of $GUIDE has no <<'SQL' ... SQL part"
sql=$(sed -E "s/\\btideway\\b/$DB_NAME/g" <<<"$sql")
printf '%s\n' "$sql" | sed 's/^/    /'
psql "$DB_ADMIN_URL" -v ON_ERROR_STOP=1 -q <<<"$sql" || fail "the guide's SQL failed"

step "step 3, first part: the guide's cargo install (with --debug here)"
install=$(block_line install 'cargo install ')
install=$(render <<<"$install")
read -r -a argv <<<"$install"
if [ -n "${TIDEWAY_BIN:-}" ]; then
    # The test command's own build of these sources (its one workspace
    # build): `cargo install` builds `-p tideway` alone, whose features
    # differ from the workspace's, and would rebuild much of the tree.
    [[ " $install " == *" --root $T/usr/local "* ]] || fail "the install line has no --root /usr/local: $install"
    say "  (not run: $install --debug; installing $TIDEWAY_BIN, the test command's build of the same sources)"
    install -D -m 755 "$TIDEWAY_BIN" "$T/usr/local/bin/tideway"
else
    say "  $install --debug"
    t0=$(date +%s)
    "${argv[@]}" --debug >"$T/cargo-install.log" 2>&1 || { show_log "$T/cargo-install.log"; fail "cargo install failed"; }
    say "  installed in $(($(date +%s) - t0)) s: $(ls "$T"/usr/local/bin/)"
fi
"$T/usr/local/bin/tideway" --version >/dev/null || fail "the installed tideway does not run"

if command -v systemd-analyze >/dev/null; then
    step "the units, checked by systemd-analyze verify"
    for u in tideway@1 tideway@2 redis-cluster@${REDIS_PORTS[0]}; do
        ln -sf "$T/etc/systemd/system/${u%%@*}@.service" "$T/etc/systemd/system/$u.service"
        out=$(systemd-analyze verify "$T/etc/systemd/system/$u.service" 2>&1) ||
            fail "systemd-analyze verify $u: $out"
        [ -z "$out" ] || fail "systemd-analyze verify $u: $out"
        say "  $u: ok"
    done
fi

step "step 2: a Redis Cluster, six nodes from redis-cluster@.service"
REDIS_PASSWORD=change-me-redis # the password of the guide's commands
grep -qx "requirepass $REDIS_PASSWORD" deploy/redis/cluster-node.conf ||
    fail "deploy/redis/cluster-node.conf no longer has requirepass $REDIS_PASSWORD: update scripts/guide.sh"
rcli() { REDISCLI_AUTH=$REDIS_PASSWORD redis-cli "$@"; }
for p in "${REDIS_PORTS[@]}"; do
    start_unit "redis-$p" "$T/etc/systemd/system/redis-cluster@.service" "$p"
    LOG2[redis-$p]="$T/var/log/redis-cluster/$p.log"
done
for p in "${REDIS_PORTS[@]}"; do
    WATCH=("${LOG[redis-$p]}" "${LOG2[redis-$p]}")
    wait_up "redis-$p" 10 rcli -p "$p" ping
    [ -f "$T/run/redis-cluster-$p/redis.pid" ] || fail "Redis on $p wrote no pidfile where the unit says"
done
WATCH=()
create=$(render <<<"$(block_line 'redis cluster' 'redis-cli --cluster create ')")
say "  $create"
bash -c "$create" >"$T/log/cluster-create.log" 2>&1 || { show_log "$T/log/cluster-create.log"; fail "redis-cli --cluster create failed"; }
cluster_ok() {
    local p
    for p in "${REDIS_PORTS[@]}"; do
        rcli -p "$p" cluster info | grep -q '^cluster_state:ok' || return 1
    done
}
wait_until 20 "the Redis Cluster is not ok" cluster_ok
primaries() { # asking the node on port
    rcli -p "$1" cluster nodes | awk '$3 ~ /master/ && $3 !~ /fail/' | wc -l
}
three_primaries() { [ "$(primaries "${REDIS_PORTS[0]}")" = 3 ]; }
wait_until 10 "the cluster does not have 3 primaries" three_primaries
say "  cluster_state:ok, 3 primaries with a replica each"

step "step 3: two tideway nodes from tideway@.service (node ids from node-1.env, node-2.env)"
for n in 1 2; do
    start_unit "tideway-$n" "$T/etc/systemd/system/tideway@.service" "$n"
done
WATCH=("${LOG[tideway-1]}" "${LOG[tideway-2]}")
for n in 1 2; do
    port=$([ $n = 1 ] && echo "$N1" || echo "$N2")
    wait_up "tideway-$n" 60 curl -sf "http://127.0.0.1:$port/readyz"
    [ "$(curl -s "http://127.0.0.1:$port/readyz")" = '{"status":"ready"}' ] || fail "node $n is not ready"
    say "  node $n: ready on $port ($(grep -o 'node_id=[0-9]*' "${LOG[tideway-$n]}" | head -1))"
done
[ "$(grep -ho 'node_id=[0-9]*' "${LOG[tideway-1]}" "${LOG[tideway-2]}" | sort -u | wc -l)" = 2 ] ||
    fail "the two nodes do not have two different node ids"

step "step 4: nginx with the guide's tideway.conf (nginx -t, then a private instance)"
block_line nginx 'nginx -t && systemctl reload nginx' >/dev/null
mkdir -p "$T/nginx/tmp" "$T/log"
cat >"$T/nginx/nginx.conf" <<EOF
# This run's nginx: the http block includes the guide's file, as Debian's does.
daemon off;
worker_processes 1;
pid $T/nginx/nginx.pid;
error_log $T/log/nginx-error.log notice;
events { worker_connections 256; }
http {
    access_log $T/log/nginx-access.log;
    client_body_temp_path $T/nginx/tmp/body;
    proxy_temp_path $T/nginx/tmp/proxy;
    fastcgi_temp_path $T/nginx/tmp/fastcgi;
    uwsgi_temp_path $T/nginx/tmp/uwsgi;
    scgi_temp_path $T/nginx/tmp/scgi;
    include $T/etc/nginx/conf.d/*.conf;
}
EOF
NGINX_ARGS=(-p "$T/nginx/" -c "$T/nginx/nginx.conf" -e "$T/log/nginx-error.log")
"$NGINX" -t "${NGINX_ARGS[@]}" >"$T/log/nginx-t.log" 2>&1 || { show_log "$T/log/nginx-t.log"; fail "nginx -t failed"; }
say "  nginx -t: $(grep -c 'successful' "$T/log/nginx-t.log") success line"
LOG[nginx]="$T/log/nginx-error.log"
"$NGINX" "${NGINX_ARGS[@]}" >>"$T/log/nginx-error.log" 2>&1 &
PID[nginx]=$!
WATCH=("${LOG[nginx]}")
B="http://127.0.0.1:$NG"
wait_up nginx 10 curl -sf "$B/readyz"

step "step 5: the guide's 'try it' block, as written"
ENVV=()
read_env_file "$T/etc/tideway/tideway.env"
KEY=
for v in "${ENVV[@]}"; do
    [[ $v == TIDEWAY_AUTH__SERVER_KEYS=* ]] && KEY=$(jq -r '.[0]' <<<"${v#*=}")
done
if [ -z "$KEY" ] || [ "$KEY" = null ]; then fail "no server key in tideway.env"; fi
WATCH=("${LOG[nginx]}" "${LOG[tideway-1]}" "${LOG[tideway-2]}")
tryit=$(doc_block 'try it')
grep -qx 'B=http://127.0.0.1' <<<"$tryit" || fail "the 'try it' block has no line B=http://127.0.0.1: update scripts/guide.sh"
# shellcheck disable=SC2001 # one whole line of several
tryit=$(sed "s#^B=http://127.0.0.1\$#B=$B#" <<<"$tryit")
bash -euo pipefail -c "$tryit" >"$T/log/try-it.out" 2>&1 || { show_log "$T/log/try-it.out"; fail "the 'try it' block failed"; }
sed 's/}{/}\n{/g; s/^/    /' "$T/log/try-it.out" | cut -c1-150
grep -q '"text":"hello"' "$T/log/try-it.out" || fail "Ann's home in the 'try it' block does not show Bob's post"

step "through the balancer: authentication, a follow graph, posts, a home page"
WATCH=("${LOG[nginx]}" "${LOG[tideway-1]}" "${LOG[tideway-2]}")
code=$(curl -s -o /dev/null -w '%{http_code}' "$B/v1/users/1/home")
[ "$code" = 401 ] || fail "a request without the Authorization header answered $code, not 401"
code=$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $KEY" "$B/metrics")
[ "$code" = 403 ] || fail "/metrics through the balancer answered $code, not 403"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$N1/metrics")" = 200 ] || fail "/metrics on node 1"
# Ann (10) follows Bob (11) and Cy (12), not Dee (13).
api POST "$B/v1/users/10/following" '{"targets": ["11", "12"]}'
expect 200 "Ann follows Bob and Cy"
[ "$(jq -c '[.results[].status]' <<<"$BODY")" = '["followed","followed"]' ] || fail "follow results: $BODY"
b1=$(post_item 11 "bob 1")
c1=$(post_item 12 "cy 1")
d1=$(post_item 13 "dee 1")
b2=$(post_item 11 "bob 2")
want=$(jq -nc --arg a "$b2" --arg b "$c1" --arg c "$b1" '[$a, $b, $c]')
wait_home 10 "$want" # Bob's and Cy's posts, newest first
say "  Ann's home: $want (not Dee's $d1)"
api GET "$B/v1/users/11"
expect 200 "GET /v1/users/11"
[ "$(jq -c '[.followers_count, .items_count]' <<<"$BODY")" = '[1,2]' ] || fail "Bob's counts: $BODY"

step "step 6: an item with an idempotency key, sent again, is the same item"
WATCH=("${LOG[nginx]}" "${LOG[tideway-1]}" "${LOG[tideway-2]}")
idem=$(doc_block idempotency)
out1=$(B=$B KEY=$KEY bash -euo pipefail -c "$idem") || fail "the idempotency block failed: $out1"
out2=$(B=$B KEY=$KEY bash -euo pipefail -c "$idem") || fail "the idempotency block failed the second time: $out2"
i1=$(jq -r .item.id <<<"$out1") i2=$(jq -r .item.id <<<"$out2")
if [ -z "$i1" ] || [ "$i1" = null ] || [ "$i1" != "$i2" ]; then
    fail "the guide's idempotent post gave $out1, then $out2"
fi
say "  the guide's block, twice: item $i1 both times"
key="guide-$$-1"
x=$(post_item 11 "once" "$key")
api POST "$B/v1/items" "$(jq -nc --arg k "$key" '{author: "11", body: {text: "once"}, idempotency_key: $k}')"
expect 200 "the same post sent again through the balancer"
[ "$(jq -r .item.id <<<"$BODY")" = "$x" ] || fail "the retry gave another item: $BODY"
for n in 1 2; do
    port=$([ $n = 1 ] && echo "$N1" || echo "$N2")
    api POST "http://127.0.0.1:$port/v1/items" "$(jq -nc --arg k "$key" '{author: "11", body: {text: "once"}, idempotency_key: $k}')"
    expect 200 "the same post sent again to node $n"
    [ "$(jq -r .item.id <<<"$BODY")" = "$x" ] || fail "the retry on node $n gave another item: $BODY"
done
want=$(jq -nc --arg x "$x" --argjson w "$want" '[$x] + $w')
wait_home 10 "$want"
say "  201 then 200 with item $x (through nginx, on node 1, on node 2); in Ann's home once"

step "a node dies: kill -9 node 1; pages and posts still answer through the balancer"
WATCH=("${LOG[nginx]}" "${LOG[tideway-2]}")
kill_component tideway-1 KILL
sleep 0.3
for i in 1 2 3 4 5 6; do
    home_ids 10 >/dev/null
done
for i in 1 2 3 4; do
    x=$(post_item 12 "after the kill $i")
    want=$(jq -nc --arg x "$x" --argjson w "$want" '[$x] + $w')
done
wait_home 10 "$want"
grep -q "connect() failed (111: Connection refused) while connecting to upstream.*127.0.0.1:$N1" "${LOG[nginx]}" ||
    fail "nginx's log shows no refused connection to node 1: the failover was not exercised"
[ "$(curl -s "http://127.0.0.1:$N2/readyz")" = '{"status":"ready"}' ] || fail "node 2's /readyz"
say "  6 pages 200, 4 posts 201, node 2 ready; nginx passed node 1's requests on (its log says so)"

step "node 1 started again, as Restart=on-failure does"
start_unit tideway-1 "$T/etc/systemd/system/tideway@.service" 1
WATCH=("${LOG[tideway-1]}")
wait_up tideway-1 30 curl -sf "http://127.0.0.1:$N1/readyz"
say "  node 1 ready"
for n in 1 2; do
    [ -z "$(ls -A "$T/cwd/tideway-$n")" ] || fail "node $n wrote into its working directory: $(ls -A "$T/cwd/tideway-$n")"
done

step "a Redis primary dies: its replica takes over"
WATCH=("${LOG[tideway-1]}" "${LOG[tideway-2]}")
link_up() {
    local p
    for p in "${REDIS_PORTS[@]}"; do
        rcli -p "$p" info replication | grep -q '^role:master' && continue
        rcli -p "$p" info replication | grep -q '^master_link_status:up' || return 1
    done
}
wait_until 30 "the replicas are not in sync with their primaries" link_up
victim=
for p in "${REDIS_PORTS[@]}"; do
    rcli -p "$p" info replication | grep -q '^role:master' && { victim=$p; break; }
done
kill_component "redis-$victim" KILL
t0=$(date +%s)
[ "$(curl -s "http://127.0.0.1:$N2/readyz")" = '{"status":"ready"}' ] || fail "a Redis primary down made node 2 unready"
# Posts by authors spread over the slots, each sent again with its key after
# a 503 (the guide's advice), until all are in.
posted=()
for a in 11 12 14 15 16 17 18 19; do
    body=$(jq -nc --arg a "$a" --arg k "guide-$$-redis-$a" '{author: $a, body: {text: "after the failover"}, idempotency_key: $k}')
    for _ in $(seq 1 60); do
        api POST "$B/v1/items" "$body"
        [ "$STATUS" = 503 ] || break
        sleep 0.5
    done
    [ "$STATUS" = 201 ] || [ "$STATUS" = 200 ] || fail "a post by $a after the failover: $STATUS $BODY"
    posted+=("$(jq -r .item.id <<<"$BODY")")
done
live=$([ "$victim" = "${REDIS_PORTS[0]}" ] && echo "${REDIS_PORTS[1]}" || echo "${REDIS_PORTS[0]}")
say "  every post in $(($(date +%s) - t0)) s after the kill"
# Posts no longer wait for the failover (tideway takes them without the dead
# primary's slots), so wait for it here: the victim's replica promoted (three
# primaries not failed) before the victim starts again, as a replica.
promoted() { # three primaries, not failed, the victim not among them
    [ "$(rcli -p "$live" cluster nodes |
        awk -v v=":$victim@" '$3 ~ /master/ && $3 !~ /fail/ && index($2, v) == 0' | wc -l)" = 3 ]
}
wait_until 30 "the victim's replica was not promoted" promoted
say "  its replica promoted $(($(date +%s) - t0)) s after the kill; $(primaries "$live") primaries"
cluster_ok_now() {
    local p
    for p in "${REDIS_PORTS[@]}"; do
        [ "$p" = "$victim" ] && continue
        rcli -p "$p" cluster info | grep -q '^cluster_state:ok' || return 1
    done
}
wait_until 10 "the cluster is not ok without $victim" cluster_ok_now
# Bob's and Cy's new posts reach Ann's home.
want=$(jq -nc --arg b "${posted[0]}" --arg c "${posted[1]}" --argjson w "$want" '[$c, $b] + $w')
wait_home 10 "$want"
start_unit "redis-$victim" "$T/etc/systemd/system/redis-cluster@.service" "$victim"
WATCH=("${LOG[redis-$victim]}" "${LOG2[redis-$victim]}")
is_replica() { rcli -p "$1" info replication | grep -q '^role:slave'; }
wait_up "redis-$victim" 20 is_replica "$victim"
say "  $victim is back, as a replica; Ann's home has the new posts"

step "done: stopping everything"
