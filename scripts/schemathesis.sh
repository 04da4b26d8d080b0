#!/usr/bin/env bash
# Runs schemathesis (every check) against a tideway server this script
# starts with a server key on a free port and a fresh data directory; fails
# on any failure. Installs schemathesis (pinned) into a virtualenv outside
# the clone the first time. Called by scripts/test.sh; runs alone too.
#   SCHEMATHESIS_EXAMPLES  test cases per operation and phase (default 30)
#   SCHEMATHESIS_SEED      the seed (default 1: the same cases every run)
#   TIDEWAY_BIN            the tideway binary to run (default: built here)
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tideway/target}"
VERSION=4.32.5
VENV="${TIDEWAY_VENV:-$HOME/.cache/tideway/venv}"
if ! "$VENV/bin/schemathesis" --version 2>/dev/null | grep -q "$VERSION"; then
  echo "installing schemathesis $VERSION into $VENV"
  if ! python3 -m venv "$VENV" 2>/dev/null; then
    # Debian's python3 needs its venv package.
    apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
    python3 -m venv "$VENV"
  fi
  "$VENV/bin/pip" install -q "schemathesis==$VERSION"
fi

# The binary the test command built (TIDEWAY_BIN, from its one workspace
# build), or one built here: `-p tideway` alone resolves other features than
# the workspace's tests and would rebuild much of the tree in between.
BIN="${TIDEWAY_BIN:-}"
if [ -z "$BIN" ]; then
  cargo build -q --locked -p tideway
  BIN="$CARGO_TARGET_DIR/debug/tideway"
fi
KEY="schemathesis-server-key-$RANDOM$RANDOM"
DATA="$(mktemp -d)"
LOG="$DATA.log"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
TIDEWAY_AUTH__SERVER_KEYS="[\"$KEY\"]" TIDEWAY_STORAGE__SYNC=buffer TIDEWAY_LOG=warn \
  "$BIN" serve --listen "127.0.0.1:$PORT" --data-dir "$DATA/data" 2>"$LOG" &
SERVER=$!
cleanup() {
  kill "$SERVER" 2>/dev/null || true
  wait "$SERVER" 2>/dev/null || true
  rm -rf "$DATA" "$LOG"
}
trap cleanup EXIT
ready() { python3 -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=1)" \
  "http://127.0.0.1:$PORT/readyz" 2>/dev/null; }
for _ in $(seq 100); do ready && break; sleep 0.1; done
ready || { echo "tideway did not start:"; cat "$LOG"; exit 1; }

# The home stream is an endless text/event-stream (no response to check
# against a schema): crates/tideway/tests/api/stream.rs tests it with an
# SSE client.
cd "$DATA"  # schemathesis writes its cache and reports in the working directory
status=0
"$VENV/bin/schemathesis" --config-file "$OLDPWD/scripts/schemathesis.toml" run \
  "http://127.0.0.1:$PORT/openapi.json" \
  --header "Authorization: Bearer $KEY" \
  --checks all \
  --exclude-path "/v1/users/{u}/home/stream" \
  --max-examples "${SCHEMATHESIS_EXAMPLES:-30}" \
  --seed "${SCHEMATHESIS_SEED:-1}" \
  --workers 2 \
  --no-color || status=$?
if grep -q "panicked" "$LOG"; then
  echo "the server panicked:"; cat "$LOG"; exit 1
fi
exit $status
