#!/usr/bin/env bash
# Storage benchmark of the embedded store: for each item count, imports that
# many items with 400-byte bodies (`tideway import`), then starts `tideway
# serve` on the directory and reports the time until /readyz answers 200 and
# the resident memory per item beyond an empty server's. With BASELINE_BIN
# (another build's `tideway`), the same directories are measured with it too,
# in the same run, and the ratios printed.
#
#   scripts/bench-storage.sh [COUNTS...]        (default: 1000000)
#   BASELINE_BIN=/path/to/old/tideway scripts/bench-storage.sh 1000000 10000000
#
# Needs ~0.7 GB of disk per million items under $BENCH_DIR (default /tmp).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tideway/target}"
cargo build --release -q -p tideway
BIN="$CARGO_TARGET_DIR/release/tideway"
BENCH_DIR="${BENCH_DIR:-/tmp}/tideway-bench-storage"
PORT="${PORT:-18231}"
COUNTS=("${@:-1000000}")
mkdir -p "$BENCH_DIR"

# Items as JSON lines: 10,000 authors, one item a millisecond, 400-byte bodies.
gen_items() {
    python3 - "$1" <<'PY'
import sys, json, datetime
n = int(sys.argv[1])
t0 = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
pad = "x" * 370
out = sys.stdout
for i in range(n):
    at = t0 + datetime.timedelta(milliseconds=i)
    out.write('{"author":"%d","created_at":"%s","body":{"n":%d,"text":"%s"}}\n'
              % (i % 10000 + 1, at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z", i, pad))
PY
}

# Starts BIN on DIR, waits for /readyz; prints "<seconds to ready> <VmRSS bytes>".
measure() {
    local bin=$1 dir=$2
    local start end pid rss
    start=$(date +%s.%N)
    TIDEWAY_STORAGE__DATA_DIR="$dir" TIDEWAY_SERVER__LISTEN="127.0.0.1:$PORT" \
        "$bin" serve >"$BENCH_DIR/serve.log" 2>&1 &
    pid=$!
    until curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; do
        kill -0 "$pid" 2>/dev/null || { cat "$BENCH_DIR/serve.log" >&2; exit 1; }
        sleep 0.02
    done
    end=$(date +%s.%N)
    sleep 1 # let start-up work settle before reading the resident size
    rss=$(awk '/VmRSS/ {print $2 * 1024}' "/proc/$pid/status")
    kill -INT "$pid"; wait "$pid" 2>/dev/null || true
    echo "$(echo "$end - $start" | bc -l) $rss"
}

report() { # label bin dir n empty_rss
    local r secs rss per
    r=$(measure "$2" "$3"); secs=${r% *}; rss=${r#* }
    per=$(( (rss - $5) / $4 ))
    printf '%-10s %10d items  ready in %6.2f s  resident %7.1f MB  %5d B/item beyond an empty server\n' \
        "$1" "$4" "$secs" "$(echo "$rss / 1048576" | bc -l)" "$per" >&2
    echo "$secs $per"
}

empty_rss() { # bin
    local d="$BENCH_DIR/empty"; rm -rf "$d"
    local r; r=$(measure "$1" "$d"); echo "${r#* }"
}

E=$(empty_rss "$BIN")
[ -n "${BASELINE_BIN:-}" ] && EB=$(empty_rss "$BASELINE_BIN")
for n in "${COUNTS[@]}"; do
    items="$BENCH_DIR/items-$n.jsonl"
    [ -s "$items" ] || gen_items "$n" >"$items"
    for which in this ${BASELINE_BIN:+baseline}; do
        bin=$BIN; [ "$which" = baseline ] && bin=$BASELINE_BIN
        dir="$BENCH_DIR/data-$which-$n"
        if [ ! -d "$dir" ]; then
            t0=$(date +%s.%N)
            TIDEWAY_STORAGE__DATA_DIR="$dir" "$bin" import --items "$items" >/dev/null
            printf '%-10s import of %d items: %.1f s\n' "$which" "$n" "$(echo "$(date +%s.%N) - $t0" | bc -l)"
        fi
    done
    this=$(report this "$BIN" "$BENCH_DIR/data-this-$n" "$n" "$E")
    if [ -n "${BASELINE_BIN:-}" ]; then
        base=$(report baseline "$BASELINE_BIN" "$BENCH_DIR/data-baseline-$n" "$n" "$EB")
        printf 'ratio (baseline / this): ready x%.1f, resident per item x%.1f\n' \
            "$(echo "${base% *} / ${this% *}" | bc -l)" "$(echo "${base#* } / (${this#* } + 0.001)" | bc -l)"
    fi
done 2>&1
