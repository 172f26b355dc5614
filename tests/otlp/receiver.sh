#!/usr/bin/env bash
# The stand-in OTLP collector of test_telemetry (receiver.js beside this
# script), which decodes what it is sent with OpenTelemetry's own message
# definitions: @opentelemetry/otlp-transformer (the protobufjs code it
# generates from opentelemetry-proto) and protobufjs, pinned in
# package.json and package-lock.json here, installed by `npm ci` into
# node_modules/ when missing (nodejs and npm from Debian's packages when
# they are missing too), as tests/s3/server.sh installs its server.
#
#   receiver.sh install            install it, print nothing on stdout
#   receiver.sh run PORT OUT       install it, then become the receiver on
#                                  127.0.0.1:PORT (0: one the kernel
#                                  picks); it prints "port N" once it
#                                  listens, and appends the spans it took
#                                  to OUT
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

install() {
  local missing=()
  command -v node >/dev/null || missing+=(nodejs)
  command -v npm >/dev/null || missing+=(npm)
  if [ ${#missing[@]} -gt 0 ]; then
    echo "installing: ${missing[*]}" >&2
    local sudo=""
    [ "$(id -u)" -ne 0 ] && sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]}"
    command -v npm >/dev/null ||
      DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq npm
  fi
  (
    flock 9
    # A copy whose lock file differs from ours (an older pin) is redone.
    if [ ! -f "$here/node_modules/@opentelemetry/otlp-transformer/package.json" ] ||
      ! cmp -s "$here/package-lock.json" \
        "$here/node_modules/.package-lock.json.installed"; then
      (cd "$here" && npm ci --no-audit --no-fund --loglevel=error >&2)
      cp "$here/package-lock.json" \
        "$here/node_modules/.package-lock.json.installed"
    fi
  ) 9>"$here/.install.lock"
}

case ${1:-} in
  install)
    install
    ;;
  run)
    [ $# -eq 3 ] || { echo "usage: receiver.sh run PORT OUT" >&2; exit 2; }
    install
    exec node "$here/receiver.js" "$2" "$3"
    ;;
  *)
    echo "usage: receiver.sh install | run PORT OUT" >&2
    exit 2
    ;;
esac
