#!/usr/bin/env bash
# The engines the scale-out tests run on: PostgreSQL, MariaDB, one Redis, and
# a three-node Redis Cluster on free loopback ports.
#
#   eval "$(scripts/services.sh up)"   # check, install (apt-get), start; print exports
#   scripts/services.sh down           # stop what `up` started for this run
#
# `up` uses a running server where there is one (PostgreSQL on 5432, MariaDB on
# 3306, Redis on 6379), starts a stopped one, and installs a missing one with
# apt-get (as root). PostgreSQL's server binaries must be there too (the
# failover tests run a primary and a standby of their own from them). The Redis Cluster is always this run's own: three
# `redis-server --cluster-enabled yes` on free ports under a temporary
# directory, removed by `down`. Progress goes to standard error; standard
# output is only the `export` lines:
#
#   TIDEWAY_TEST_POSTGRES_URL  postgres://postgres@127.0.0.1:5432/test
#   TIDEWAY_TEST_MYSQL_URL     mysql://root@127.0.0.1:3306/test
#   TIDEWAY_TEST_REDIS_URL     redis://127.0.0.1:6379
#   TIDEWAY_TEST_REDIS_CLUSTER comma-separated node URLs
#   TIDEWAY_TEST_CLUSTER_DIR   the cluster's directory (what `down` removes)
#   TIDEWAY_TEST_FAKETIME      libfaketime's library (apt-get install libfaketime)
#
# Each test gives itself a fresh database or key prefix, so runs on the same
# servers do not see each other.
set -euo pipefail

log() { echo "services: $*" >&2; }

apt_install() { # packages...
    if [ "$(id -u)" != 0 ]; then
        log "missing $*: install them (apt-get install $*) or run as root"
        exit 1
    fi
    log "installing $* with apt-get"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2 ||
        { apt-get update -q >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "$@" >&2; }
}

wait_for() { # what, command...
    local what=$1; shift
    for _ in $(seq 1 150); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.2
    done
    log "$what did not come up"
    exit 1
}

redis_up() {
    command -v redis-server >/dev/null || apt_install redis-server
    if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
        log "starting Redis on 6379"
        mkdir -p /var/lib/redis /var/log/redis
        redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
            --dir /var/lib/redis --logfile /var/log/redis/ci.log >&2
        wait_for "Redis" redis-cli -h 127.0.0.1 -p 6379 ping
    fi
    echo "export TIDEWAY_TEST_REDIS_URL=redis://127.0.0.1:6379"
}

wait_briefly() { # command... (up to 3 s; no exit on failure)
    for _ in $(seq 1 30); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.1
    done
    return 1
}

port_free() { # port
    ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

stop_cluster() { # dir: stops its nodes and removes it
    for pid in "$1"/*/redis.pid; do
        [ -f "$pid" ] && kill "$(cat "$pid")" 2>/dev/null || true
    done
    rm -rf "$1"
}

cluster_up() {
    local dir ports=() p urls=() low attempt
    dir=$(mktemp -d /tmp/tideway-redis-cluster.XXXXXX)
    # Ports below the ephemeral range (outgoing connections take those at any
    # moment), with their cluster-bus ports (+10000) below it too.
    low=$(awk '{print $1}' /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
    while [ ${#ports[@]} -lt 3 ]; do
        for attempt in 1 2 3 4 5; do
            p=$((10000 + RANDOM % (low - 20000)))
            if port_free "$p" && port_free $((p + 10000)) && [[ " ${ports[*]} " != *" $p "* ]]; then
                mkdir -p "$dir/$p"
                redis-server --daemonize yes --bind 127.0.0.1 --port "$p" --cluster-enabled yes \
                    --cluster-config-file "$dir/$p/nodes.conf" --dir "$dir/$p" --save "" --appendonly no \
                    --cluster-require-full-coverage no \
                    --pidfile "$dir/$p/redis.pid" --logfile "$dir/$p/redis.log" >&2
                if wait_briefly redis-cli -p "$p" ping; then
                    ports+=("$p")
                    urls+=("redis://127.0.0.1:$p")
                    break
                fi
                log "a Redis Cluster node on $p did not start (port taken?): trying another port"
            fi
            [ "$attempt" = 5 ] && { log "no free port for a Redis Cluster node"; stop_cluster "$dir"; exit 1; }
        done
    done
    log "creating a Redis Cluster on ${ports[*]}"
    redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-yes >"$dir/create.log" 2>&1 ||
        { cat "$dir/create.log" >&2; stop_cluster "$dir"; exit 1; }
    for p in "${ports[@]}"; do
        wait_briefly sh -c "redis-cli -p $p cluster info | grep -q cluster_state:ok" ||
            wait_briefly sh -c "redis-cli -p $p cluster info | grep -q cluster_state:ok" ||
            { log "the Redis Cluster did not become ready"; stop_cluster "$dir"; exit 1; }
    done
    echo "export TIDEWAY_TEST_REDIS_CLUSTER=$(IFS=,; echo "${urls[*]}")"
    echo "export TIDEWAY_TEST_CLUSTER_DIR=$dir"
}

postgres_up() {
    command -v pg_ctlcluster >/dev/null || apt_install postgresql
    # The failover tests make a primary and a standby of their own from the
    # server binaries (initdb, pg_ctl, pg_basebackup): the postgresql package
    # brings them, a client-only install does not.
    if ! ls /usr/lib/postgresql/*/bin/initdb /usr/lib/postgresql/*/bin/pg_basebackup >/dev/null 2>&1; then
        apt_install postgresql
    fi
    if ! pg_isready -q -h 127.0.0.1 -p 5432; then
        log "starting PostgreSQL"
        local version; version=$(ls /etc/postgresql | sort -V | tail -1)
        pg_ctlcluster --skip-systemctl-redirect "$version" main start >&2 || true
        wait_for "PostgreSQL" pg_isready -q -h 127.0.0.1 -p 5432
    fi
    # A fresh install asks for passwords on TCP: the tests connect as postgres
    # on loopback without one.
    if ! psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1' >/dev/null 2>&1; then
        local hba; hba=$(ls /etc/postgresql/*/main/pg_hba.conf | sort -V | tail -1)
        log "allowing loopback connections without a password in $hba"
        sed -i '1i host all all 127.0.0.1/32 trust' "$hba"
        su postgres -c "psql -Atc 'select pg_reload_conf()'" >/dev/null
        wait_for "PostgreSQL on loopback" psql -h 127.0.0.1 -U postgres -d postgres -Atc 'select 1'
    fi
    if [ "$(psql -h 127.0.0.1 -U postgres -d postgres -Atc "select 1 from pg_database where datname = 'test'")" != 1 ]; then
        psql -h 127.0.0.1 -U postgres -d postgres -qc 'create database test' >&2
    fi
    echo "export TIDEWAY_TEST_POSTGRES_URL=postgres://postgres@127.0.0.1:5432/test"
}

mysql_up() {
    command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server
    if ! mysqladmin -h 127.0.0.1 -u root ping >/dev/null 2>&1; then
        log "starting MariaDB"
        mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld 2>/dev/null || true
        start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd >&2
        wait_for "MariaDB" mysqladmin -h 127.0.0.1 -u root ping
    fi
    # A fresh install lets root in through the socket only.
    if ! mysql -h 127.0.0.1 -u root -e 'select 1' >/dev/null 2>&1; then
        log "allowing root on loopback without a password"
        mysql -u root -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket" >&2
    fi
    mysql -h 127.0.0.1 -u root -e 'create database if not exists test' >&2
    echo "export TIDEWAY_TEST_MYSQL_URL=mysql://root@127.0.0.1:3306/test"
}

down() {
    # Databases a failed test could not drop (a panic skips its cleanup).
    if [ -n "${TIDEWAY_TEST_POSTGRES_URL:-}" ]; then
        for db in $(psql "$TIDEWAY_TEST_POSTGRES_URL" -Atc "select datname from pg_database where datname like 'tw\_test\_%'" 2>/dev/null); do
            psql "$TIDEWAY_TEST_POSTGRES_URL" -qc "drop database $db with (force)" >&2 || true
        done
    fi
    if [ -n "${TIDEWAY_TEST_MYSQL_URL:-}" ]; then
        for db in $(mysql -h 127.0.0.1 -u root -N -e "show databases like 'tw\_test\_%'" 2>/dev/null); do
            mysql -h 127.0.0.1 -u root -e "drop database $db" >&2 || true
        done
    fi
    # Keys of test prefixes a failed test could not purge.
    if [ -n "${TIDEWAY_TEST_REDIS_URL:-}" ]; then
        for pattern in 'test[0-9]*:*' 'sqltest[0-9]*:*' 'model[0-9]*x[0-9]*:*' 'nodes[0-9]*:*'; do
            redis-cli -u "$TIDEWAY_TEST_REDIS_URL" --scan --pattern "$pattern" |
                xargs -r redis-cli -u "$TIDEWAY_TEST_REDIS_URL" del >/dev/null || true
        done
    fi
    local dir=${TIDEWAY_TEST_CLUSTER_DIR:-}
    [ -n "$dir" ] && [ -d "$dir" ] || return 0
    stop_cluster "$dir"
    log "stopped the Redis Cluster in $dir"
}

faketime_up() { # libfaketime: the clock-skew test runs a node with its clock moved
    local so
    so=$(find /usr/lib /usr/local/lib -name 'libfaketime.so.1' 2>/dev/null | head -n 1)
    if [ -z "$so" ]; then
        apt_install libfaketime
        so=$(find /usr/lib /usr/local/lib -name 'libfaketime.so.1' 2>/dev/null | head -n 1)
    fi
    [ -n "$so" ] || { log "libfaketime.so.1 not found after installing libfaketime"; exit 1; }
    echo "export TIDEWAY_TEST_FAKETIME=$so"
}

case "${1:-up}" in
up)
    redis_up
    cluster_up
    postgres_up
    mysql_up
    faketime_up
    ;;
down) down ;;
*)
    echo "usage: $0 up|down" >&2
    exit 2
    ;;
esac
