#!/usr/bin/env bash
# Home reads over HTTP, measured by a load generator outside the server
# process (wrk, from Debian's packages), against the release binary on the
# embedded store populated over HTTP (scripts/bench/populate.py).
#
# For each binary (this tree's, and BASELINE_BIN when given, e.g. a build of
# an older commit) and each connection count in CONNS, wrk runs closed loop
# for DURATION: requests/s and latency p50/p99. Twice: with both cores shared
# by server and wrk ("shared"), and with the server pinned to core 0 and wrk
# to core 1 ("split": a separate load machine, minus one core).
#   USERS FOLLOWS POSTS CONNS DURATION BASELINE_BIN   (defaults below)
# ROUNDS=n repeats the measured runs n times over the same data, the binaries
# alternating within each round (a noisy machine's drift then shows as the
# spread between rounds); MODES="shared" or "split" runs one of the two.
# SHARED=postgres or SHARED=mysql runs the server as a node on that engine and
# Redis instead (from `eval "$(scripts/services.sh up)"`: a fresh database on
# TIDEWAY_TEST_POSTGRES_URL's or TIDEWAY_TEST_MYSQL_URL's server and a fresh key
# prefix on TIDEWAY_TEST_REDIS_URL, removed at exit), and beside it, in the
# same run, the seeds' design behind HTTP (`bench-nodes --serve-seeds`: items
# and graph in a second fresh database, a Redis ZSET timeline per reader, the
# same populate script and the same wrk reads), as binary "seeds".
# Under each row, the CPU each party used per request (scripts/bench/cpu.py:
# the server, the engines' processes, wrk): what bounds the rate on 2 cores.
# wrk has no open loop: "p99 at a rate" is read from the closed-loop run
# with the fewest connections that reaches the rate.
# WORKLOAD=likes runs likes instead of home reads (scripts/bench/like.lua:
# random users like random posts, each binary's own); the seeds' design has
# no likes and is left out.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tideway/target}"
USERS="${USERS:-2000}" FOLLOWS="${FOLLOWS:-100}" POSTS="${POSTS:-40000}"
CONNS="${CONNS:-4 8 16 32}" DURATION="${DURATION:-10s}"
ROUNDS="${ROUNDS:-1}" MODES="${MODES:-shared split}" WORKLOAD="${WORKLOAD:-home}"
case "$WORKLOAD" in
  home) LUA=scripts/bench/home.lua ;;
  likes) LUA=scripts/bench/like.lua ;;
  *) echo "WORKLOAD must be home or likes"; exit 2 ;;
esac
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
command -v taskset >/dev/null || { apt-get update -qq && apt-get install -y -qq util-linux >/dev/null; }
cargo build -q --release --locked -p tideway
[ -n "${SHARED:-}" ] && cargo build -q --release --locked -p tideway-bench --bin bench-nodes
BIN="$CARGO_TARGET_DIR/release/tideway"
DATA="$(mktemp -d)"
cp "$BIN" "$DATA/tideway-this"
BINS=("this:$DATA/tideway-this")
[ -n "${BASELINE_BIN:-}" ] && BINS+=("baseline:$BASELINE_BIN")
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
SERVER=""
start() {  # $1 binary (or "seeds"), $2 taskset prefix or empty
  if [ "$1" = seeds ]; then
    $2 "$DATA/bench-nodes" --serve-seeds "127.0.0.1:$PORT" --sql "$SEEDS_URL" \
      --redis "$TIDEWAY_TEST_REDIS_URL" --prefix "benchseeds$$:" 2>>"$DATA/server.log" &
  else
    $2 env TIDEWAY_LOG=warn TIDEWAY_STORAGE__SYNC=buffer "$1" serve --listen "127.0.0.1:$PORT" \
      --data-dir "$DATA/data" 2>>"$DATA/server.log" &
  fi
  SERVER=$!
  for _ in $(seq 100); do
    python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1])" "http://127.0.0.1:$PORT/readyz" \
      2>/dev/null && return
    sleep 0.1
  done
  echo "server did not start:"; cat "$DATA/server.log"; exit 1
}
stop() { kill -TERM "$SERVER"; wait "$SERVER" || true; }
CLEANUP=":"
# On SQL each binary has a database and a Redis prefix of its own (a newer
# build migrates its schema, which an older one then refuses), populated alike.
engine() {  # $1 binary name: its database and prefix (and its posts' ids)
  export ITEMS_FILE="$DATA/items-this"
  if [ -n "${SHARED:-}" ]; then
    export TIDEWAY_STORAGE__URL="${base%/*}/tw_bench_$$_$1" TIDEWAY_REDIS__PREFIX="benchhttp$$$1:"
    ITEMS_FILE="$DATA/items-$1"
  fi
}
if [ -n "${SHARED:-}" ]; then
  sdb="tw_seeds_$$" dbs=""
  for b in "${BINS[@]}"; do dbs="$dbs tw_bench_$$_${b%%:*}"; done
  case "$SHARED" in
    postgres) base="$TIDEWAY_TEST_POSTGRES_URL"
              for d in $dbs $sdb; do psql "$base" -qc "create database $d"; done
              for d in $dbs $sdb; do CLEANUP="$CLEANUP; psql '$base' -qc 'drop database $d with (force)'"; done ;;
    mysql) base="$TIDEWAY_TEST_MYSQL_URL"
           for d in $dbs $sdb; do mysql -h 127.0.0.1 -u root -e "create database $d"; done
           for d in $dbs $sdb; do CLEANUP="$CLEANUP; mysql -h 127.0.0.1 -u root -e 'drop database $d'"; done ;;
    *) echo "SHARED must be postgres or mysql"; exit 2 ;;
  esac
  SEEDS_URL="${base%/*}/$sdb"
  cp "$CARGO_TARGET_DIR/release/bench-nodes" "$DATA/bench-nodes"
  export TIDEWAY_STORAGE__BACKEND="$SHARED" TIDEWAY_REDIS__URLS="$TIDEWAY_TEST_REDIS_URL"
  for p in benchhttp benchseeds; do
    CLEANUP="$CLEANUP; redis-cli -u '$TIDEWAY_TEST_REDIS_URL' --scan --pattern '$p$$*' | xargs -r redis-cli -u '$TIDEWAY_TEST_REDIS_URL' del >/dev/null"
  done
fi
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DATA"; eval "$CLEANUP"' EXIT

# (the embedded store is one data directory: populated once, by this tree)
populated=("${BINS[0]}")
[ -n "${SHARED:-}" ] && populated=("${BINS[@]}")
for b in "${populated[@]}"; do
  engine "${b%%:*}"
  start "${b#*:}" ""
  python3 scripts/bench/populate.py 127.0.0.1 "$PORT" "$USERS" "$FOLLOWS" "$POSTS"
  stop   # a clean stop writes the inbox snapshot: every start below is warm
done
if [ -n "${SHARED:-}" ] && [ "$WORKLOAD" = home ]; then
  start seeds ""
  python3 scripts/bench/populate.py 127.0.0.1 "$PORT" "$USERS" "$FOLLOWS" "$POSTS"
  # The seeds' fan-out runs behind the posts: wait until it has taken every job.
  until [ "$(python3 -c "import urllib.request,sys; print(urllib.request.urlopen(sys.argv[1]).read().decode())" \
             "http://127.0.0.1:$PORT/backlog")" = 0 ]; do sleep 0.5; done
  sleep 2  # the last jobs taken finish delivering
  stop
  BINS+=("seeds:seeds")
fi
export USERS DELAY_MS=0
printf '%-5s %-9s %-7s %5s %12s %10s %10s\n' round binary cores conns "requests/s" p50 p99
for round in $(seq "$ROUNDS"); do
for cores in $MODES; do
  for b in "${BINS[@]}"; do
    name="${b%%:*}" path="${b#*:}"
    engine "$name"
    if [ $cores = split ]; then start "$path" "taskset -c 0"; WRK="taskset -c 1 wrk"; else start "$path" ""; WRK="wrk"; fi
    $WRK -t1 -c8 -d3s -s "$LUA" "http://127.0.0.1:$PORT" >/dev/null  # warm-up
    for c in $CONNS; do
      python3 scripts/bench/cpu.py "$SERVER" $WRK -t1 -c"$c" -d"$DURATION" --latency -s "$LUA" \
        "http://127.0.0.1:$PORT" 2>"$DATA/cpu" |
        awk -v r="$round" -v n="$name" -v k="$cores" -v c="$c" '
          $1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 } $1 == "Requests/sec:" { rps = $2 }
          END { printf "%-5s %-9s %-7s %5s %12s %10s %10s\n", r, n, k, c, rps, p50, p99 }'
      sed 's/^/                /' "$DATA/cpu"
    done
    stop
  done
done
done
