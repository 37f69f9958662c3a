#!/usr/bin/env bash
# Installs redis-server (Debian package) when it is missing. Used by the test and demo commands.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
echo "redis-server not found: installing it (apt-get)..." >&2
SUDO=""
if [ "$(id -u)" != "0" ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq redis-server >/dev/null
# The package may start a system service on 6379; the tests never use it (they start their own
# servers on free ports) and we leave it alone.
command -v redis-server >/dev/null
