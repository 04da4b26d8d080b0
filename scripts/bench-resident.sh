#!/usr/bin/env bash
# Resident memory of the embedded store while it serves, against its budgets.
# For each binary (this tree's release build, and BASELINE_BIN when given, e.g.
# a build of an older commit, measured in the same run): a fresh data directory,
# `tideway serve` with storage.cache_size CACHE (index_size INDEX where the
# binary knows it), USERS users following FOLLOWS others each
# (scripts/bench/populate.py), then 32 wrk connections posting 380-byte items
# by random authors for WRITE (scripts/bench/post.lua), then every user's home
# read once. Prints the resident set (VmRSS) every 5 s and at each step (the
# last 15 s after the reads, once the allocator's purge delay passed), the
# items written, the growth per item written, and the growth beyond the
# configured budgets (cache_size + index_size) per item. With READ_CONNS > 0,
# as many wrk connections read random users' homes all the while the posts
# are written (scripts/bench/home.lua): a soak of writes and reads. SYNC is
# storage.sync: buffer by default (the figures of docs/benchmarks.md before
# 2026-12-05), fsync as the server's own default.
#   USERS FOLLOWS WRITE CACHE INDEX READ_CONNS SYNC BASELINE_BIN   (defaults below)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tideway/target}"
USERS="${USERS:-2000}" FOLLOWS="${FOLLOWS:-50}" WRITE="${WRITE:-45s}"
CACHE="${CACHE:-64MiB}" INDEX="${INDEX:-256MiB}" READ_CONNS="${READ_CONNS:-0}" SYNC="${SYNC:-buffer}"
PORT="${PORT:-18251}"
command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk >/dev/null; }
cargo build -q --release --locked -p tideway
BINS=("$CARGO_TARGET_DIR/release/tideway")
NAMES=("this tree")
if [ -n "${BASELINE_BIN:-}" ]; then BINS+=("$BASELINE_BIN"); NAMES+=("baseline"); fi
WORK="$(mktemp -d)"
PID=""
cleanup() { [ -n "$PID" ] && kill "$PID" 2>/dev/null; rm -rf "$WORK"; }
trap cleanup EXIT

rss() { awk '/VmRSS/ {print $2 * 1024}' "/proc/$1/status"; }
mib() { awk -v b="$1" 'BEGIN { printf "%.0f MiB", b / 1048576 }'; }

for i in "${!BINS[@]}"; do
  bin=${BINS[$i]} name=${NAMES[$i]}
  rm -rf "$WORK/data"
  # (a binary without storage.index_size would refuse the variable: only this tree's gets it)
  extra=(); [ "$name" = "this tree" ] && extra=("TIDEWAY_STORAGE__INDEX_SIZE=$INDEX")
  env "${extra[@]}" TIDEWAY_SERVER__LISTEN="127.0.0.1:$PORT" TIDEWAY_STORAGE__DATA_DIR="$WORK/data" \
    TIDEWAY_STORAGE__SYNC="$SYNC" TIDEWAY_STORAGE__CACHE_SIZE="$CACHE" TIDEWAY_LOG=warn "$bin" serve > "$WORK/log" 2>&1 &
  PID=$!
  for _ in $(seq 100); do curl -sf "127.0.0.1:$PORT/readyz" >/dev/null && break; sleep 0.1; done
  kill -0 "$PID" 2>/dev/null || { cat "$WORK/log"; exit 1; }
  start=$(rss "$PID")
  python3 scripts/bench/populate.py 127.0.0.1 "$PORT" "$USERS" "$FOLLOWS" 0 >/dev/null
  echo "== $name: ready at $(mib "$start"), after the graph $(mib "$(rss "$PID")")"
  USERS="$USERS" wrk -t2 -c32 -d"$WRITE" -s scripts/bench/post.lua "http://127.0.0.1:$PORT" > "$WORK/wrk" &
  WRK=$!
  READER=""
  if [ "$READ_CONNS" -gt 0 ]; then
    USERS="$USERS" wrk -t1 -c"$READ_CONNS" -d"$WRITE" -s scripts/bench/home.lua "http://127.0.0.1:$PORT" > "$WORK/wrk-read" &
    READER=$!
  fi
  while kill -0 "$WRK" 2>/dev/null; do
    sleep 5
    n=$(curl -sf "127.0.0.1:$PORT/v1/stats" |
      python3 -c 'import json,sys; d=json.load(sys.stdin); print(d["items"], "items,", d["fanout"]["pending"], "fan-out jobs pending, inboxes", (d["inboxes"] or {}).get("bytes", 0) >> 20, "MiB")' ||
      echo "?")
    m=$(curl -sf "127.0.0.1:$PORT/metrics" || true)
    pinned=$(awk '/^tideway_disk_pinned_bytes / {print $2}' <<<"$m")
    buffered=$(awk '/^tideway_disk_buffered_bytes / {print $2}' <<<"$m")
    ixb=$(awk '/^tideway_index_bytes / {print $2}' <<<"$m")
    echo "   writing: $(mib "$(rss "$PID")") at $n${ixb:+, index $(mib "$ixb")}${pinned:+, pinned by the tables $(mib "$pinned")}${buffered:+, memtables $(mib "$buffered")}"
  done
  wait "$WRK" || true
  if [ -n "$READER" ]; then
    wait "$READER" || true
    echo "   homes read meanwhile: $(grep -o 'Requests/sec: *[0-9.]*' "$WORK/wrk-read"), $(grep -o '[0-9]* requests in' "$WORK/wrk-read")"
  fi
  items=$(curl -sf "127.0.0.1:$PORT/v1/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin)["items"])')
  written=$(rss "$PID")
  python3 - "$PORT" "$USERS" <<'PY'
import http.client, sys
conn = http.client.HTTPConnection("127.0.0.1", int(sys.argv[1]))
for u in range(1, int(sys.argv[2]) + 1):
    conn.request("GET", f"/v1/users/{u}/home?limit=20")
    r = conn.getresponse(); r.read()
    assert r.status == 200, r.status
PY
  read_all=$(rss "$PID")
  # Freed memory stays with the allocator for its purge delay (10 s,
  # tideway_engines::allocator): the resident set once it has passed.
  sleep 15
  rest=$(rss "$PID")
  m=$(curl -sf "127.0.0.1:$PORT/metrics" || true)
  idx=$(awk '/^tideway_index_bytes / {print $2}' <<<"$m")
  pinned=$(awk '/^tideway_disk_pinned_bytes / {print $2}' <<<"$m")
  pins=""
  [ -n "$pinned" ] && pins="; pinned by the tables: $(mib "$pinned"), $(awk -v p="$pinned" -v n="$items" 'BEGIN { printf "%.1f", p / n }') B per item"
  echo "   $items items written ($(grep -o 'Requests/sec: *[0-9.]*' "$WORK/wrk")); after writing $(mib "$written"), after reading every home $(mib "$read_all"), 15 s later $(mib "$rest")${idx:+; index holds $(mib "$idx")}$pins"
  budgets=$(python3 -c 'import sys
def b(s):
    for u, m in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if s.endswith(u): return int(s[:-3]) * m
    return int(s)
print(b(sys.argv[1]) + b(sys.argv[2]))' "$CACHE" "$INDEX")
  beyond=$(( read_all - start - budgets )); [ "$beyond" -lt 0 ] && beyond=0
  echo "   $name: $(( (read_all - start) / items )) bytes resident per item written; beyond cache_size + index_size: $(( beyond / items )) per item"
  kill "$PID"; wait "$PID" 2>/dev/null || true; PID=""
done
