#!/usr/bin/env bash
# The install that the test servers and benchmarks written for node share
# (tests/s3/server.sh, tests/otlp/receiver.sh, bench/dbos/run.sh): nodejs
# and npm from Debian's packages when either is missing, then `npm ci` of
# the package.json and package-lock.json in DIR into DIR/node_modules,
# unless FILE (a path under DIR) is there and the copy was made from this
# lock file (an older pin is redone).  Serialised by a lock beside
# node_modules, so suites started at once install once.  Prints nothing
# on stdout.
#
#   npm_ci.sh DIR FILE
set -euo pipefail
[ $# -eq 2 ] || { echo "usage: npm_ci.sh DIR FILE" >&2; exit 2; }
dir=$1 file=$2

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "installing: nodejs npm" >&2
  as_root=()
  [ "$(id -u)" -eq 0 ] || as_root=(sudo)
  "${as_root[@]}" apt-get update -qq
  DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq nodejs npm
fi
(
  flock 9
  if [ ! -f "$dir/$file" ] ||
    ! cmp -s "$dir/package-lock.json" \
      "$dir/node_modules/.package-lock.json.installed"; then
    (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error >&2)
    cp "$dir/package-lock.json" \
      "$dir/node_modules/.package-lock.json.installed"
  fi
) 9>"$dir/.install.lock"
