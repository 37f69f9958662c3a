#!/usr/bin/env bash
# The test command: installs redis-server if missing, then runs the whole suite (unit tests,
# integration tests against throwaway redis-server processes, cross-process lock-peer tests,
# doc tests), with every optional feature on so the tracing/metrics tests run too.
#
# The test targets run a few at a time (scripts/run-tests.py; TEST_JOBS, default 3). With
# arguments, they are passed to one plain `cargo test --workspace --all-features` instead
# (e.g. `scripts/test.sh --test rlock`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
if [ $# -gt 0 ]; then
  exec cargo test --workspace --all-features "$@"
fi
exec python3 scripts/run-tests.py
