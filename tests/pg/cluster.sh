#!/usr/bin/env bash
# A throwaway PostgreSQL cluster for tests and benchmarks, from Debian's
# server package (postgresql, installed by .ci/deps).
#
#   cluster.sh start DIR   initdb into DIR/data and start the server; print
#                          a libpq connection string on stdout once it
#                          accepts connections to its database `duro`
#   cluster.sh stop DIR    stop the server fast and remove DIR
#   cluster.sh kill DIR    stop the server at once as a crash would (an
#                          immediate shutdown: no checkpoint, clients cut
#                          off) and keep DIR; a later start brings the
#                          same cluster back with its data (crash
#                          recovery) and prints the same string
#   cluster.sh standby PRIMARY DIR
#                          a streaming standby of the running cluster in
#                          PRIMARY, in DIR (a base backup), made its
#                          synchronous standby (a commit waits for it, so
#                          nothing acknowledged is lost with the primary);
#                          prints a connection string naming both for a
#                          client that wants the writable one
#                          (target_session_attrs=read-write)
#   cluster.sh promote DIR the standby in DIR becomes a primary
#
# The server listens only on a Unix socket in DIR (no TCP), keeps fsync
# and synchronous_commit on (durability figures depend on them) and a
# small shared_buffers, and room for the connections of several hosts
# (each at most 10) and the suites' own.  Its superuser `duro` has a random password
# (scram-sha-256), part of the printed string.  Started by root, the
# server runs as the system user `duro-test` (made if missing), since
# postgres refuses to run as root; otherwise as the caller.  DIR must be
# missing or empty, and reachable by that user.  Both commands are safe
# to repeat: a second start prints the running cluster's string, a second
# stop (or kill) does nothing.  No `main` cluster of the system is ever used.
set -euo pipefail

# Nothing of the caller's libpq environment may redirect our clients.
while read -r v; do unset "$v"; done < <(compgen -e | grep '^PG' || true)

readonly test_user=duro-test
readonly port=5432 # only names the socket file: there is no TCP

die() {
  echo "cluster.sh: $*" >&2
  exit 1
}

# The newest server under DURO_PG_LIB (default /usr/lib/postgresql).
find_bindir() {
  local lib=${DURO_PG_LIB:-/usr/lib/postgresql} best="" v
  for d in "$lib"/*/bin; do
    [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] || continue
    v=$(basename "$(dirname "$d")")
    if [ -z "$best" ] || [ "${v%%.*}" -gt "$(basename "$(dirname "$best")")" ]; then
      best=$d
    fi
  done
  [ -n "$best" ] || die "no PostgreSQL server (initdb, pg_ctl, postgres) under $lib/*/bin: install the Debian packages postgresql and libpq-dev (bash .ci/deps)"
  echo "$best"
}

# Runs a command as the cluster's owner.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u "$test_user" -- "$@"
  else
    "$@"
  fi
}

ensure_user() {
  [ "$(id -u)" -eq 0 ] || return 0
  id -u "$test_user" >/dev/null 2>&1 && return 0
  # Another start may be making it at the same moment: check again.
  useradd --system --no-create-home --home-dir /nonexistent \
    --shell /usr/sbin/nologin "$test_user" 2>/dev/null ||
    id -u "$test_user" >/dev/null 2>&1 ||
    die "cannot create the system user $test_user"
}

# A value quoted for a libpq key=value string.
quote() {
  local v=${1//\\/\\\\}
  printf "'%s'" "${v//\'/\\\'}"
}

running() { [ -f "$1/data/postmaster.pid" ] && as_owner "$bindir/pg_ctl" -D "$1/data" status >/dev/null 2>&1; }

# Starts the server of DIR's data and waits until it accepts connections.
serve() {
  local dir=$1
  as_owner "$bindir/pg_ctl" -D "$dir/data" -l "$dir/server.log" -s -w \
    -t 30 start || {
    cat "$dir/server.log" >&2 2>/dev/null || true
    die "the server did not start (log: $dir/server.log)"
  }
  local i
  for ((i = 0; i < 300; i++)); do
    "$bindir/pg_isready" -q -h "$dir" -p "$port" -d postgres && break
    sleep 0.1
  done
  "$bindir/pg_isready" -q -h "$dir" -p "$port" -d postgres ||
    die "the server does not accept connections (log: $dir/server.log)"
}

start() {
  local dir=$1
  if [ -f "$dir/conninfo" ] && running "$dir"; then
    cat "$dir/conninfo"
    return 0
  fi
  # A cluster that was killed: the same server on the same data again.
  if [ -f "$dir/conninfo" ] && [ -d "$dir/data" ]; then
    serve "$dir"
    cat "$dir/conninfo"
    return 0
  fi
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty (and holds no running cluster)"
  # The socket's path must fit in sockaddr_un (107 bytes).
  [ ${#dir} -le 80 ] || die "$dir is too long for a Unix socket path"
  ensure_user
  if [ "$(id -u)" -eq 0 ]; then
    chown "$test_user:" "$dir"
    runuser -u "$test_user" -- test -x "$dir" ||
      die "$test_user cannot reach $dir: a directory above it is closed to other users (choose another TMPDIR)"
  fi
  chmod 700 "$dir"

  local password
  password=$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')
  as_owner sh -c 'umask 077; cat >"$1"' sh "$dir/pwfile" <<<"$password"
  # --no-sync: a throwaway cluster needs no fsync of initdb's own files;
  # the server itself runs with fsync on.
  as_owner "$bindir/initdb" -D "$dir/data" -U duro --pwfile="$dir/pwfile" \
    --auth=scram-sha-256 -E UTF8 --locale=C --no-sync --no-instructions \
    >"$dir/initdb.log" 2>&1 || {
    cat "$dir/initdb.log" >&2
    die "initdb failed"
  }
  rm -f "$dir/pwfile"
  # A host reads on one connection per thread (its HTTP pool's 16, its
  # workers, its scheduler) beside its writer's: room for a few hosts.
  as_owner sh -c 'cat >>"$1"' sh "$dir/data/postgresql.conf" <<EOF
# cluster.sh: a throwaway cluster on a Unix socket only
listen_addresses = ''
unix_socket_directories = '$dir'
port = $port
fsync = on
synchronous_commit = on
full_page_writes = on
shared_buffers = 16MB
max_connections = 100
EOF
  serve "$dir"
  PGPASSWORD=$password "$bindir/createdb" -h "$dir" -p "$port" -U duro duro ||
    die "createdb duro failed"
  local conninfo="host=$(quote "$dir") port=$port dbname=duro user=duro password=$password"
  as_owner sh -c 'umask 077; cat >"$1"' sh "$dir/conninfo" <<<"$conninfo"
  echo "$conninfo"
}

# Stops DIR's server at once, if one runs.  Immediate: nothing of a
# throwaway cluster is worth a checkpoint, and to its clients it is a
# crash.  pg_ctl waits until the postmaster and all its children are gone.
halt() {
  local dir=$1
  [ -f "$dir/data/postmaster.pid" ] || return 0
  bindir=$(find_bindir)
  if ! as_owner "$bindir/pg_ctl" -D "$dir/data" -s -w -t 30 \
    -m immediate stop >/dev/null 2>&1 && running "$dir"; then
    die "the server in $dir did not stop"
  fi
}

stop() {
  local dir=$1
  [ -e "$dir" ] || return 0
  halt "$dir"
  rm -rf "$dir"
}

# DIR becomes a synchronous streaming standby of the cluster in PRIMARY
# (with DURO_PG_STANDBY=async an asynchronous one: the primary
# acknowledges a commit before the standby has it).
standby() {
  local primary dir=$2 conninfo password
  primary=$(cd "$1" && pwd)
  [ -f "$primary/conninfo" ] && running "$primary" || die "no running cluster in $primary"
  conninfo=$(cat "$primary/conninfo")
  password=${conninfo##*password=}
  password=${password%% *}
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ -z "$(ls -A "$dir")" ] || die "$dir is not empty"
  [ ${#dir} -le 80 ] || die "$dir is too long for a Unix socket path"
  if [ "$(id -u)" -eq 0 ]; then chown "$test_user:" "$dir"; fi
  chmod 700 "$dir"
  PGPASSWORD=$password as_owner "$bindir/pg_basebackup" -h "$primary" \
    -p "$port" -U duro -D "$dir/data" -X stream -c fast --no-sync \
    >"$dir/basebackup.log" 2>&1 || {
    cat "$dir/basebackup.log" >&2
    die "pg_basebackup of $primary failed"
  }
  # its own socket, and the primary it follows (with its password)
  as_owner sh -c 'printf "%s\n" "$2" >>"$1"' sh "$dir/data/postgresql.conf" \
    "unix_socket_directories = '$dir'"
  as_owner sh -c 'umask 077; printf "%s\n" "$2" >>"$1"' sh \
    "$dir/data/postgresql.auto.conf" \
    "primary_conninfo = 'host=$primary port=$port user=duro password=$password application_name=standby'"
  as_owner touch "$dir/data/standby.signal"
  serve "$dir"
  local want=sync
  if [ "${DURO_PG_STANDBY:-sync}" = async ]; then
    want=async
  else
    as_owner sh -c 'printf "%s\n" "$2" >>"$1"' sh "$primary/data/postgresql.conf" \
      "synchronous_standby_names = 'standby'"
    as_owner "$bindir/pg_ctl" -D "$primary/data" -s reload >/dev/null
  fi
  # a synchronous standby: a commit counts only once it streams as the
  # synchronous one; an asynchronous one: once it streams
  local i state=""
  for ((i = 0; i < 300; i++)); do
    state=$(PGPASSWORD=$password "$bindir/psql" -h "$primary" -p "$port" \
      -U duro -d duro -Atc "SELECT sync_state FROM pg_stat_replication WHERE application_name='standby'" 2>/dev/null || true)
    [ "$state" = "$want" ] && break
    sleep 0.1
  done
  [ "$state" = "$want" ] || die "the standby in $dir is not streaming as the $want one (log: $dir/server.log)"
  local both="host=$(quote "$primary,$dir") port=$port,$port dbname=duro user=duro password=$password target_session_attrs=read-write"
  as_owner sh -c 'umask 077; cat >"$1"' sh "$dir/conninfo" <<<"$both"
  echo "$both"
}

promote() {
  local dir=$1
  as_owner "$bindir/pg_ctl" -D "$dir/data" -s -w -t 30 promote >/dev/null ||
    die "the standby in $dir was not promoted"
}

usage="usage: cluster.sh start|stop|kill|promote DIR, or cluster.sh standby PRIMARY DIR"
[ $# -ge 2 ] && [ -n "$2" ] || die "$usage"
case $1 in
  standby) [ $# -eq 3 ] || die "$usage"; bindir=$(find_bindir); standby "$2" "$3" ;;
  promote) bindir=$(find_bindir); promote "$2" ;;
  start) bindir=$(find_bindir); start "$2" ;;
  stop) stop "$2" ;;
  kill) [ -f "$2/conninfo" ] || die "no cluster in $2"; halt "$2" ;;
  *) die "$usage" ;;
esac
