#!/usr/bin/env bash
# The Java lock peer over real Redisson: compiles it if needed (build.sh) and runs it with the
# given arguments, e.g. compat-tests/java/lock-peer.sh --watchdog-ms 5000 redis://127.0.0.1:PORT
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$("$here/build.sh")
exec java -cp "$REDISSON_CLASSPATH:$out" LockPeer "$@"
