#!/bin/sh
# out_of_tree.sh SOURCE_ROOT — builds a plugin the way a user outside this
# repository would: against an installed duro, found with pkg-config.
#
#  1. configure the source in a scratch build directory with --prefix in a
#     temporary directory, build and `meson install` it;
#  2. compile examples/orders/orders.c with nothing but
#     `pkg-config --cflags duro-plugin jansson` (PKG_CONFIG_PATH pointing at
#     the installed duro-plugin.pc) and the plugin link flags;
#  3. check that duro.h came from the installed prefix, that the plugin
#     exports duro_plugin and nothing else of its own, and that the
#     installed `duro check` accepts a config loading it.
#
# Everything happens in a temporary directory, removed on exit.
set -eu

src=${1:?usage: out_of_tree.sh SOURCE_ROOT}
src=$(cd "$src" && pwd)
cc=${CC:-cc}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-oot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix

fail() {
  echo "out_of_tree: $*" >&2
  exit 1
}

# 1. Install to a prefix.  The test suites are not needed for that.
meson setup "$tmp/build" "$src" --prefix "$prefix" -Dtests=false \
  >"$tmp/setup.log" 2>&1 || { cat "$tmp/setup.log" >&2; fail "meson setup failed"; }
meson install -C "$tmp/build" >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log" >&2; fail "meson install failed"; }

pc=$(find "$prefix" -name duro-plugin.pc | head -n 1)
[ -n "$pc" ] || fail "no duro-plugin.pc installed under $prefix"
[ -f "$prefix/include/duro.h" ] || fail "duro.h not installed in $prefix/include"
PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
export PKG_CONFIG_PATH

# 2. Build the example out of tree: a copy, so no in-tree header is near it.
mkdir "$tmp/plugin"
cp "$src/examples/orders/orders.c" "$tmp/plugin/"
cflags=$(pkg-config --cflags duro-plugin jansson) ||
  fail "pkg-config --cflags duro-plugin jansson failed"
libs=$(pkg-config --libs jansson) || fail "pkg-config --libs jansson failed"
echo "cflags: $cflags"
case " $cflags " in
*" -I$prefix/include "*) ;;
*) fail "pkg-config --cflags duro-plugin does not name $prefix/include: $cflags" ;;
esac

# shellcheck disable=SC2086 # the flags are lists of words
(cd "$tmp/plugin" &&
  "$cc" -std=c11 -Wall -Wextra -Werror -fPIC -fvisibility=hidden \
    $cflags -MMD -MF orders.d -c orders.c -o orders.o &&
  "$cc" -shared -Wl,-z,defs orders.o $libs -o liborders.so) ||
  fail "the out-of-tree build of orders.c failed"

# 3a. The header it compiled against is the installed one.
grep -q "$prefix/include/duro.h" "$tmp/plugin/orders.d" ||
  { cat "$tmp/plugin/orders.d" >&2; fail "orders.c did not use $prefix/include/duro.h"; }

# 3b. One exported symbol of its own: the descriptor entry.
syms=$(nm -D --defined-only "$tmp/plugin/liborders.so" | awk '$2 == "T" || $2 == "D" || $2 == "B" { print $3 }' |
  grep -v -e '^_init$' -e '^_fini$' || true)
[ "$syms" = "duro_plugin" ] || fail "liborders.so exports \"$syms\", expected only duro_plugin"

# 3c. The installed host loads it.
cat >"$tmp/duro.yaml" <<EOF
storage:
  path: $tmp/var/duro.db
plugins:
  - name: orders
    path: $tmp/plugin/liborders.so
    workflows:
      - { name: order-flow, binding: ORDER_FLOW, class_name: OrderFlow }
EOF
"$prefix/bin/duro" check "$tmp/duro.yaml" || fail "installed duro check refused the plugin"
[ ! -e "$tmp/var" ] || fail "duro check created $tmp/var"
echo "out_of_tree: ok"
