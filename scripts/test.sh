#!/usr/bin/env bash
# The test command of the README (and of CI: .ci/run calls exactly this).
# Ends with scripts/guide.sh, which runs docs/deploy.md on loopback.
# Works on a fresh machine: scripts/services.sh checks, installs (apt-get) and
# starts the engines the scale-out tests use (PostgreSQL, MariaDB, Redis) and
# a Redis Cluster of its own on free ports, stopped again on exit; each test
# takes a fresh database or key prefix. schemathesis is installed (pinned,
# from PyPI) into a virtualenv outside the clone on first use. A persistent target dir outside the clone keeps
# repeated runs fast; override with CARGO_TARGET_DIR.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/tideway/target}"
export CARGO_TERM_COLOR="${CARGO_TERM_COLOR:-never}"

echo "== format"
cargo fmt --all --check
echo "== lint"
cargo clippy --workspace --all-targets --locked -- -D warnings
echo "== alert rules"
if ! command -v promtool >/dev/null && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
  echo "(promtool not found: installing Debian's prometheus package for it)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1 ||
    { apt-get update -q >/dev/null 2>&1 &&
      DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null 2>&1; } || true
fi
if command -v promtool >/dev/null; then
  promtool check rules deploy/prometheus/tideway-rules.yml
  promtool test rules deploy/prometheus/tideway-rules.test.yml
else
  echo "(promtool not found: deploy/prometheus/tideway-rules.yml not checked; apt-get install prometheus provides it)"
fi
echo "== build: the workspace's tests and binaries, once"
# One build for everything below: the tests, schemathesis' server and the
# guide's installed binary are all this build's (cargo build -p tideway or
# cargo install would resolve other features and rebuild much of the tree).
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-run
else
  cargo test --workspace --locked --no-run
fi
export TIDEWAY_BIN="$CARGO_TARGET_DIR/debug/tideway"
echo "== API contract: schemathesis against the OpenAPI document"
scripts/schemathesis.sh
echo "== engines: PostgreSQL, MariaDB, Redis, a Redis Cluster"
# (assigned first: a failure inside "$(...)" would not stop an eval)
engines="$(scripts/services.sh up)" || { echo "the engines could not be started" >&2; exit 1; }
eval "$engines"
trap 'scripts/services.sh down' EXIT
echo "== tests"
if cargo nextest --version >/dev/null 2>&1; then
  cargo nextest run --workspace --locked --no-fail-fast
else
  echo "(cargo-nextest not found: using cargo test)"
  cargo test --workspace --locked --no-fail-fast
fi
echo "== deployment guide: docs/deploy.md run on loopback"
# Its own debug install of tideway (cargo install --debug; on a cold target dir
# a few crates are built again with tideway's features alone), a Redis Cluster
# and nginx of its own, on the PostgreSQL above; about 25 s once built.
scripts/guide.sh
