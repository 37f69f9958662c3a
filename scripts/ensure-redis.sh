#!/usr/bin/env bash
# Installs what the tests need from Debian's packages when it is missing: redis-server (with
# redis-cli, which builds the test clusters) and openssl (the TLS tests make their own CA).
# Used by the test and demo commands.
set -euo pipefail
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-cli >/dev/null 2>&1 || missing+=(redis-tools)
command -v openssl >/dev/null 2>&1 || missing+=(openssl)
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "installing ${missing[*]} (apt-get)..." >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
# The package may start a system service on 6379; the tests never use it (they start their own
# servers on free ports) and we leave it alone.
command -v redis-server >/dev/null && command -v redis-cli >/dev/null && command -v openssl >/dev/null
