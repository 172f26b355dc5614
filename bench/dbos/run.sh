#!/usr/bin/env bash
# W1-W3 of duro-bench run on DBOS Transact (bench.js, the SDK pinned in
# package.json) against a throwaway PostgreSQL cluster of tests/pg/cluster.sh,
# the kind `make bench-pg` runs duro's on, so both sets of figures come from
# the same machine and the same server settings (fsync and
# synchronous_commit on, a Unix socket only).
#
#   run.sh [--only W1,W2,W3] [--sleepers N] [--pool N] [--csv]
#
# --sleepers is W3's N (default 10,000); --pool is DBOS's system database
# pool (default 10, DBOS's own).  Installs nodejs and npm (Debian packages)
# when missing and the SDK with `npm ci`; starts the cluster in a new
# directory under TMPDIR (default /tmp: it must be reachable by other users,
# see cluster.sh) and stops it on every way out.  Each workload runs in a
# process of its own.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)

only=W1,W2,W3
args=()
while [ $# -gt 0 ]; do
  case $1 in
    --only) only=$2; shift 2 ;;
    --sleepers | --pool) args+=("$1" "$2"); shift 2 ;;
    --csv) args+=("$1"); shift ;;
    *) echo "usage: run.sh [--only W1,W2,W3] [--sleepers N] [--pool N] [--csv]" >&2; exit 2 ;;
  esac
done

bash "$root/tests/npm_ci.sh" "$here" node_modules/.package-lock.json
node_major=$(node -p 'process.versions.node.split(".")[0]')
[ "$node_major" -ge 20 ] ||
  echo "run.sh: warning: node $(node --version): the pinned SDK asks for node >= 20" >&2

cluster=$(mktemp -d "${TMPDIR:-/tmp}/duro-dbos.XXXXXX")
trap '"$root/tests/pg/cluster.sh" stop "$cluster"' EXIT
conninfo=$("$root/tests/pg/cluster.sh" start "$cluster")
# cluster.sh prints host='DIR' ... password=HEX; node-postgres takes the
# socket's directory as the URL's host parameter.
password=$(sed -n "s/.* password=\([0-9a-f]*\).*/\1/p" <<<"$conninfo")
host=$(node -p 'encodeURIComponent(process.argv[1])' "$cluster")
url="postgresql://duro:$password@localhost/duro?host=$host&port=5432"

version=$(node -p 'require(process.argv[1]).version' \
  "$here/node_modules/@dbos-inc/dbos-sdk/package.json")
echo "DBOS Transact (@dbos-inc/dbos-sdk) $version on node $(node --version)" >&2
for w in ${only//,/ }; do
  # --no-deprecation: the SDK calls node-postgres in a way pg 8 warns of.
  node --no-deprecation "$here/bench.js" --url "$url" --only "$w" "${args[@]}"
done
