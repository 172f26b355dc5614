#!/usr/bin/env bash
# The S3-compatible server of the s3 sink's tests (test_pipeline_s3): the
# npm package @20minutes/s3rver (a maintained fork of s3rver that checks
# AWS Signature Version 4 signatures; s3rver 3.7.1, the last release of
# the original, accepts any signature), pinned in package.json and
# package-lock.json beside this script, installed by `npm ci` into
# node_modules/ here when missing (nodejs and npm from Debian's packages
# when they are missing too).
#
#   server.sh install                 install it, print nothing on stdout
#   server.sh run DIR PORT BUCKET     install it, then become the server:
#                                     objects kept under DIR, bucket BUCKET
#                                     made if missing, 127.0.0.1:PORT (0:
#                                     one the kernel picks); it prints
#                                     "S3rver listening on 127.0.0.1:N"
#                                     once it accepts requests
#
# Its one account has the access key id S3RVER and the secret key S3RVER;
# a request signed otherwise is refused 403 (InvalidAccessKeyId,
# SignatureDoesNotMatch), as is one without x-amz-content-sha256.
# SIGTERM or SIGKILL stops it; DIR keeps the objects for a later run.  The
# install is serialised by a lock beside node_modules, so suites started
# at once install it once.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)

install() {
  bash "$here/../npm_ci.sh" "$here" node_modules/@20minutes/s3rver/lib/cli.js
}

case ${1:-} in
  install)
    install
    ;;
  run)
    [ $# -eq 4 ] || { echo "usage: server.sh run DIR PORT BUCKET" >&2; exit 2; }
    install
    mkdir -p "$2"
    exec node "$here/serve.js" --silent \
      --directory "$2" --address 127.0.0.1 --port "$3" \
      --configure-bucket "$4"
    ;;
  *)
    echo "usage: server.sh install | run DIR PORT BUCKET" >&2
    exit 2
    ;;
esac
