#!/usr/bin/env bash
# The demo command: installs redis-server if missing; when REDIS_URL is not set, starts a
# throwaway redis-server on a free loopback port (stopped by PID on exit); then runs the demo.
# With REDISSON_CLASSPATH set (README, "Beside real Java Redisson"), it also compiles the Java
# driver of real Redisson (compat-tests/java/build.sh) and the demo puts a Java process beside
# a Rust one.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/ensure-redis.sh
PID=""
cleanup() { if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; fi; rm -rf "${DIR:-}"; }
trap cleanup EXIT
if [ -z "${REDIS_URL:-}" ]; then
  DIR=$(mktemp -d)
  for _ in $(seq 1 20); do
    PORT=$(( 20000 + RANDOM % 30000 ))
    redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$DIR" \
      >/dev/null 2>&1 &
    PID=$!
    for _ in $(seq 1 50); do
      if redis-cli -p "$PORT" ping >/dev/null 2>&1; then break 2; fi
      if ! kill -0 "$PID" 2>/dev/null; then break; fi
      sleep 0.1
    done
    kill "$PID" 2>/dev/null || true
    PID=""
  done
  [ -n "$PID" ] || { echo "could not start redis-server" >&2; exit 1; }
  export REDIS_URL="redis://127.0.0.1:$PORT"
  echo "started a throwaway redis-server on port $PORT (pid $PID)"
fi
if [ -n "${REDISSON_CLASSPATH:-}" ]; then
  DEMO_JAVA_CLASSPATH="$REDISSON_CLASSPATH:$(compat-tests/java/build.sh)"
  export DEMO_JAVA_CLASSPATH
fi
cargo run --release --quiet --example demo
