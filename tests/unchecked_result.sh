#!/bin/sh
# unchecked_result.sh SOURCE_ROOT — a step call whose result is dropped
# (a forgotten DURO_TRY) must not compile under -Wall -Wextra -Werror:
# plugins/fixtures/unchecked_result.c must fail to compile, naming duro_do,
# and must compile with -DCHECKED, where the call goes through DURO_TRY.
set -eu

src=${1:?usage: unchecked_result.sh SOURCE_ROOT}
cc=${CC:-cc}
fixture=$src/plugins/fixtures/unchecked_result.c

tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-unchecked.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

compile() {
  "$cc" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -fPIC \
    -I"$src/plugin-api" "$@" -c "$fixture" -o "$tmp/out.o"
}

if ! compile -DCHECKED 2>"$tmp/checked.log"; then
  cat "$tmp/checked.log" >&2
  echo "unchecked_result: the checked variant does not compile" >&2
  exit 1
fi
if compile 2>"$tmp/unchecked.log"; then
  echo "unchecked_result: a dropped duro_do result compiled with -Werror" >&2
  exit 1
fi
if ! grep -q "duro_do" "$tmp/unchecked.log"; then
  cat "$tmp/unchecked.log" >&2
  echo "unchecked_result: the compile failed, but not on duro_do" >&2
  exit 1
fi
echo "unchecked_result: refused as expected:"
cat "$tmp/unchecked.log"
