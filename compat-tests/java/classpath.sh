#!/usr/bin/env bash
# Prints the class path of Redisson VERSION (default 3.52.0) and its runtime dependencies, taken
# from Maven Central by Maven (`mvn`; the jars are kept in ~/.m2), for REDISSON_CLASSPATH:
#   export REDISSON_CLASSPATH=$(compat-tests/java/classpath.sh 3.52.0)
# Redisson logs through SLF4J; with no SLF4J provider on the class path it logs nothing (append
# a provider's jar, e.g. slf4j-simple, to see its warnings).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
version=${1:-3.52.0}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
mvn -q -B -f "$here/pom.xml" -Dredisson.version="$version" \
  dependency:build-classpath -Dmdep.includeScope=runtime -Dmdep.outputFile="$out" >&2
cat "$out"
echo
