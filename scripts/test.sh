#!/usr/bin/env bash
# The test command: installs redis-server if missing, then runs the whole suite (unit tests,
# integration tests against throwaway redis-server processes, cross-process lock-peer tests, and
# the cross-language tests beside real Java Redisson), with every optional feature on so the
# tracing/metrics tests run too. The Java tests need REDISSON_CLASSPATH (README: "Beside real
# Java Redisson"); the Java driver is compiled against it (and REDISSON_CLASSPATH_ALT) first, so
# a compile error shows before the suite runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
for cp in "${REDISSON_CLASSPATH:-}" "${REDISSON_CLASSPATH_ALT:-}"; do
  if [ -n "$cp" ]; then
    REDISSON_CLASSPATH=$cp compat-tests/java/build.sh >/dev/null
  fi
done
cargo test --workspace --all-features "$@"
