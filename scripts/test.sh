#!/usr/bin/env bash
# The test command: installs redis-server if missing, then runs the whole suite (unit tests,
# integration tests against throwaway redis-server processes, cross-process lock-peer tests, the
# cross-language tests beside real Java Redisson, doc tests), with every optional feature on so
# the tracing/metrics tests run too.
#
# The Java tests need REDISSON_CLASSPATH (README: "Beside real Java Redisson"); the Java driver
# is compiled against it (and REDISSON_CLASSPATH_ALT) first, so a compile error shows before the
# suite runs. Without it they are skipped, each with a `SKIPPED test` line (test-kit/src/skip.rs),
# and the summary counts them as skipped, not passed. With it, no test may skip for want of it
# (nor of REDISSON_CLASSPATH_ALT when that is set): such a skip fails the test and the run.
#
# The test targets run a few at a time (scripts/run-tests.py; TEST_JOBS, default 3). With
# arguments, they are passed to one plain `cargo test --workspace --all-features` instead
# (e.g. `scripts/test.sh --test rlock`).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
if [ -z "${REDISSON_CLASSPATH:-}" ]; then
  echo "REDISSON_CLASSPATH is not set: the cross-language tests beside Java Redisson are SKIPPED" >&2
  echo "(README, \"Beside real Java Redisson\", says how to get it)" >&2
  export REDISSON_SKIP_JAVA=1
fi
for cp in "${REDISSON_CLASSPATH:-}" "${REDISSON_CLASSPATH_ALT:-}"; do
  if [ -n "$cp" ]; then
    REDISSON_CLASSPATH=$cp compat-tests/java/build.sh >/dev/null
  fi
done
if [ $# -gt 0 ]; then
  exec cargo test --workspace --all-features "$@"
fi
exec python3 scripts/run-tests.py
