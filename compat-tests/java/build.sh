#!/usr/bin/env bash
# Compiles the Java lock peer (LockPeer.java) against the Redisson class path in
# $REDISSON_CLASSPATH into target/java/<hash of the class path>/ and prints that directory.
# A build newer than the source is kept. Run it with:
#   java -cp "$REDISSON_CLASSPATH:$(compat-tests/java/build.sh)" LockPeer redis://127.0.0.1:PORT
# (or compat-tests/java/lock-peer.sh, which does both). Where the class path comes from: README,
# "Beside real Java Redisson".
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cp=${REDISSON_CLASSPATH:?"set REDISSON_CLASSPATH to the class path of Redisson and its dependencies (README: Beside real Java Redisson)"}
key=$(printf '%s' "$cp" | sha1sum | cut -c1-12)
out=${CARGO_TARGET_DIR:-$root/target}/java/$key
if [ ! -f "$out/LockPeer.class" ] || [ "$here/LockPeer.java" -nt "$out/LockPeer.class" ]; then
  mkdir -p "${out%/*}"
  tmp=$(mktemp -d "$out.tmp.XXXXXX")
  javac -nowarn -encoding UTF-8 -cp "$cp" -d "$tmp" "$here/LockPeer.java" >&2
  printf '%s\n' "$cp" >"$tmp/classpath"
  rm -rf "$out"
  mv "$tmp" "$out"
fi
echo "$out"
