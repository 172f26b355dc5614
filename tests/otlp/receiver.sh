#!/usr/bin/env bash
# The stand-in OTLP collector of test_telemetry (receiver.js beside this
# script), which decodes what it is sent with OpenTelemetry's own message
# definitions: @opentelemetry/otlp-transformer (the protobufjs code it
# generates from opentelemetry-proto) and protobufjs, pinned in
# package.json and package-lock.json here, installed by `npm ci` into
# node_modules/ when missing (nodejs and npm from Debian's packages when
# they are missing too: tests/npm_ci.sh), as tests/s3/server.sh installs
# its server.
#
#   receiver.sh PORT OUT    install it, then become the receiver on
#                           127.0.0.1:PORT (0: one the kernel picks); it
#                           prints "port N" once it listens, and appends
#                           the spans it took to OUT
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

[ $# -eq 2 ] || { echo "usage: receiver.sh PORT OUT" >&2; exit 2; }
bash "$here/../npm_ci.sh" "$here" \
  node_modules/@opentelemetry/otlp-transformer/package.json
exec node "$here/receiver.js" "$1" "$2"
