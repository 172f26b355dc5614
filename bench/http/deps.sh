#!/usr/bin/env bash
# Installs wrk (Debian package `wrk`), the load generator of
# bench/http/run.sh, if missing.  Called by `make bench-http`, not by CI's
# .ci/deps: CI does not run benches.
set -euo pipefail
command -v wrk >/dev/null && exit 0
echo "installing: wrk" >&2
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wrk
