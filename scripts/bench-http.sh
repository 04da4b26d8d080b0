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
# SHARED=postgres or SHARED=mysql runs the server as a node on that engine and
# Redis instead (from `eval "$(scripts/services.sh up)"`: a fresh database on
# TIDEWAY_TEST_POSTGRES_URL's or TIDEWAY_TEST_MYSQL_URL's server and a fresh key
# prefix on TIDEWAY_TEST_REDIS_URL, removed at exit).
# wrk has no open loop: "p99 at a rate" is read from the closed-loop run
# with the fewest connections that reaches the rate.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tideway/target}"
USERS="${USERS:-2000}" FOLLOWS="${FOLLOWS:-100}" POSTS="${POSTS:-40000}"
CONNS="${CONNS:-4 8 16 32}" DURATION="${DURATION:-10s}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
command -v taskset >/dev/null || { apt-get update -qq && apt-get install -y -qq util-linux >/dev/null; }
cargo build -q --release --locked -p tideway
BIN="$CARGO_TARGET_DIR/release/tideway"
DATA="$(mktemp -d)"
cp "$BIN" "$DATA/tideway-this"
BINS=("this:$DATA/tideway-this")
[ -n "${BASELINE_BIN:-}" ] && BINS+=("baseline:$BASELINE_BIN")
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
SERVER=""
start() {  # $1 binary, $2 taskset prefix or empty
  $2 env TIDEWAY_LOG=warn TIDEWAY_STORAGE__SYNC=buffer "$1" serve --listen "127.0.0.1:$PORT" \
    --data-dir "$DATA/data" 2>>"$DATA/server.log" &
  SERVER=$!
  for _ in $(seq 100); do
    python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1])" "http://127.0.0.1:$PORT/readyz" \
      2>/dev/null && return
    sleep 0.1
  done
  echo "server did not start:"; cat "$DATA/server.log"; exit 1
}
stop() { kill -TERM "$SERVER"; wait "$SERVER" || true; }
CLEANUP=""
if [ -n "${SHARED:-}" ]; then
  db="tw_bench_$$"
  case "$SHARED" in
    postgres) base="$TIDEWAY_TEST_POSTGRES_URL"; psql "$base" -qc "create database $db"
              CLEANUP="psql '$base' -qc 'drop database $db with (force)'" ;;
    mysql) base="$TIDEWAY_TEST_MYSQL_URL"; mysql -h 127.0.0.1 -u root -e "create database $db"
           CLEANUP="mysql -h 127.0.0.1 -u root -e 'drop database $db'" ;;
    *) echo "SHARED must be postgres or mysql"; exit 2 ;;
  esac
  export TIDEWAY_STORAGE__BACKEND="$SHARED" TIDEWAY_STORAGE__URL="${base%/*}/$db"
  export TIDEWAY_REDIS__URLS="$TIDEWAY_TEST_REDIS_URL" TIDEWAY_REDIS__PREFIX="benchhttp$$:"
  CLEANUP="$CLEANUP; redis-cli -u '$TIDEWAY_TEST_REDIS_URL' --scan --pattern 'benchhttp$$:*' | xargs -r redis-cli -u '$TIDEWAY_TEST_REDIS_URL' del >/dev/null"
fi
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DATA"; eval "$CLEANUP"' EXIT

start "$DATA/tideway-this" ""
python3 scripts/bench/populate.py 127.0.0.1 "$PORT" "$USERS" "$FOLLOWS" "$POSTS"
stop   # a clean stop writes the inbox snapshot: every start below is warm
export USERS DELAY_MS=0
printf '%-9s %-7s %5s %12s %10s %10s\n' binary cores conns "requests/s" p50 p99
for cores in shared split; do
  for b in "${BINS[@]}"; do
    name="${b%%:*}" path="${b#*:}"
    if [ $cores = split ]; then start "$path" "taskset -c 0"; WRK="taskset -c 1 wrk"; else start "$path" ""; WRK="wrk"; fi
    $WRK -t1 -c8 -d3s -s scripts/bench/home.lua "http://127.0.0.1:$PORT" >/dev/null  # warm-up
    for c in $CONNS; do
      $WRK -t1 -c"$c" -d"$DURATION" --latency -s scripts/bench/home.lua "http://127.0.0.1:$PORT" |
        awk -v n="$name" -v k="$cores" -v c="$c" '
          $1 == "50%" { p50 = $2 } $1 == "99%" { p99 = $2 } $1 == "Requests/sec:" { rps = $2 }
          END { printf "%-9s %-7s %5s %12s %10s %10s\n", n, k, c, rps, p50, p99 }'
    done
    stop
  done
done
