#!/usr/bin/env bash
# The test command: installs redis-server if missing, then runs the whole suite (unit tests,
# integration tests against throwaway redis-server processes, cross-process lock-peer tests),
# with every optional feature on so the tracing/metrics tests run too.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
cargo test --workspace --all-features "$@"
