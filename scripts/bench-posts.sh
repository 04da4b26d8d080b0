#!/usr/bin/env bash
# Posts over HTTP counted once their fan-out is done, one node on PostgreSQL or
# MariaDB + Redis beside the seeds' design (`bench-nodes --serve-seeds`: one
# INSERT and a job on a Redis list, delivered by ZADD + trim), in the same run.
#
#   ENGINE=postgres|mysql   the database (default postgres)
#   BASELINE_BIN            an older `tideway` binary, measured beside this tree's
#   ROUNDS USERS FOLLOWS POSTS CONNS DURATION   (defaults below)
#
# Each server gets a fresh database and Redis prefix (removed at exit), is
# populated by scripts/bench/populate.py (USERS who follow FOLLOWS each, POSTS
# posts, every home read once so every inbox exists), and stopped. Then ROUNDS
# rounds, the servers alternating: a server starts, waits until no fan-out is
# pending (`/v1/stats` `fanout.pending`, the seeds' `/backlog`), takes `wrk
# -cCONNS -dDURATION -s scripts/bench/post.lua` (400-byte posts by random
# authors), and its clock stops when nothing is pending again. It prints
# the posts acknowledged a second, the posts a second with their fan-out done,
# and the CPU each party used a post over the whole time (scripts/bench/cpu.py:
# the server, the engines, the load; what bounds the rate on 2 cores).
# Engines: TIDEWAY_TEST_* as `eval "$(scripts/services.sh up)"` exports them, or that
# command is run here (starting or installing what is missing).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tideway/target}"
ENGINE="${ENGINE:-postgres}" ROUNDS="${ROUNDS:-2}"
USERS="${USERS:-2000}" FOLLOWS="${FOLLOWS:-100}" POSTS="${POSTS:-20000}"
CONNS="${CONNS:-16}" DURATION="${DURATION:-5s}"
case "$ENGINE" in postgres | mysql) ;; *) echo "ENGINE must be postgres or mysql" >&2; exit 2 ;; esac
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
CLEANUP=":"
if [ -z "${TIDEWAY_TEST_REDIS_URL:-}" ]; then
  eval "$(scripts/services.sh up)"
  CLEANUP="scripts/services.sh down"
fi
cargo build -q --release --locked -p tideway
cargo build -q --release --locked -p tideway-bench --bin bench-nodes
DATA="$(mktemp -d)"
cp "$CARGO_TARGET_DIR/release/tideway" "$DATA/tideway-this"
cp "$CARGO_TARGET_DIR/release/bench-nodes" "$DATA/bench-nodes"
BINS=("this:$DATA/tideway-this")
[ -n "${BASELINE_BIN:-}" ] && BINS+=("baseline:$BASELINE_BIN")
BINS+=("seeds:seeds")
if [ "$ENGINE" = postgres ]; then base="$TIDEWAY_TEST_POSTGRES_URL"; else base="$TIDEWAY_TEST_MYSQL_URL"; fi
REDIS="$TIDEWAY_TEST_REDIS_URL"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
SERVER=""
for b in "${BINS[@]}"; do
  db="tw_bposts_$$_${b%%:*}"
  if [ "$ENGINE" = postgres ]; then
    psql "$base" -qc "create database $db"
    CLEANUP="$CLEANUP; psql '$base' -qc 'drop database $db with (force)'"
  else
    mysql -h 127.0.0.1 -u root -e "create database $db"
    CLEANUP="$CLEANUP; mysql -h 127.0.0.1 -u root -e 'drop database $db'"
  fi
done
CLEANUP="$CLEANUP; redis-cli -u '$REDIS' --scan --pattern 'bposts$$*' | xargs -r redis-cli -u '$REDIS' del >/dev/null"
trap 'kill $SERVER 2>/dev/null || true; rm -rf "$DATA"; eval "$CLEANUP"' EXIT

start() {  # $1 name, $2 binary (or "seeds")
  local url="${base%/*}/tw_bposts_$$_$1"
  if [ "$2" = seeds ]; then
    "$DATA/bench-nodes" --serve-seeds "127.0.0.1:$PORT" --sql "$url" --redis "$REDIS" --prefix "bposts$$$1:" \
      2>>"$DATA/server.log" &
  else
    TIDEWAY_LOG=warn TIDEWAY_STORAGE__BACKEND="$ENGINE" TIDEWAY_STORAGE__URL="$url" TIDEWAY_REDIS__URLS="$REDIS" \
      TIDEWAY_REDIS__PREFIX="bposts$$$1:" TIDEWAY_STORAGE__SYNC=buffer "$2" serve --listen "127.0.0.1:$PORT" \
      2>>"$DATA/server.log" &
  fi
  SERVER=$!
  for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1 && return
    curl -sf "http://127.0.0.1:$PORT/backlog" >/dev/null 2>&1 && return
    sleep 0.1
  done
  echo "server did not start:"; cat "$DATA/server.log"; exit 1
}
stop() { kill -TERM "$SERVER"; wait "$SERVER" || true; SERVER=""; }
# Fan-out jobs pending (curl and grep only: the poll must cost the machine
# next to nothing while the servers drain).
pending() {
  if [ "$1" = seeds ]; then curl -s "http://127.0.0.1:$PORT/backlog"
  else curl -s "http://127.0.0.1:$PORT/v1/stats" | grep -oP '"pending":\K\d+'; fi
}
drained() { until [ "$(pending "$1")" = 0 ]; do sleep 0.05; done; }
export -f pending drained
export PORT

for b in "${BINS[@]}"; do
  start "${b%%:*}" "${b#*:}"
  python3 scripts/bench/populate.py 127.0.0.1 "$PORT" "$USERS" "$FOLLOWS" "$POSTS"
  drained "${b%%:*}"
  stop
done

export USERS
printf '%-9s %5s %8s %14s %12s  %s\n' binary round posts "acknowledged/s" "done/s" "cpu µs a post"
for round in $(seq "$ROUNDS"); do
  for b in "${BINS[@]}"; do
    name="${b%%:*}"
    start "$name" "${b#*:}"
    drained "$name"
    sleep 2
    t0=$(date +%s.%N)
    python3 scripts/bench/cpu.py "$SERVER" bash -c "wrk -t1 -c$CONNS -d$DURATION -s scripts/bench/post.lua \
      http://127.0.0.1:$PORT; date +%s.%N > $DATA/acked; drained $name" >"$DATA/wrk" 2>"$DATA/cpu"
    t2=$(date +%s.%N)
    # cpu.py divides by wrk's rate times the whole time; a post's share is
    # that times the rate over the posts.
    python3 - "$name" "$round" "$t0" "$(cat "$DATA/acked")" "$t2" "$DATA/wrk" "$DATA/cpu" <<'PY'
import re, sys
name, rnd, t0, t1, t2 = sys.argv[1], sys.argv[2], *map(float, sys.argv[3:6])
out, cpu = open(sys.argv[6]).read(), open(sys.argv[7]).read()
posts = int(re.search(r"(\d+) requests in", out).group(1))
rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
scale = rps * (t2 - t0) / posts
line = cpu.split("cpu µs/request:", 1)[1].split("(")[0]
parts = "  ".join(f"{k} {float(v) * scale:.0f}" for k, v in re.findall(r"(\w+) (\d+)", line))
print(f"{name:<9} {rnd:>5} {posts:>8} {posts / (t1 - t0):>14.0f} {posts / (t2 - t0):>12.0f}  {parts}")
PY
    stop
  done
done
