#!/bin/sh
# out_of_tree.sh SOURCE_ROOT [BUILD_ROOT] — builds and checks plugins the
# way a user outside this repository would: against an installed duro,
# found with pkg-config.  BUILD_ROOT is a configured and built meson build
# directory, by default the current one (meson test runs tests there).
#
#  1. install BUILD_ROOT into a staging directory, as `make install
#     DESTDIR=…` does (meson install --destdir), and check that duro,
#     duro.h, duro-plugin.pc, duro(1), the template and the systemd unit
#     landed; that the man page renders without warnings and names every
#     command and option `duro help` lists; and that the unit runs the
#     installed binary;
#  2. copy examples/template to a scratch folder, build it with its own
#     Makefile against the installed duro-plugin.pc (pkg-config with the
#     staging directory as its sysroot) and check it with the installed
#     `duro check` on its own duro.yaml; then run its `make test`, its
#     tests linked with the installed test kit (duro-test.pc);
#  3. compile examples/orders/orders.c with nothing but
#     `pkg-config --cflags duro-plugin jansson` and the plugin flags, and
#     check that it exports duro_plugin and nothing else of its own;
#  4. build the template again against the build tree, uninstalled:
#     PKG_CONFIG_PATH=BUILD_ROOT/meson-uninstalled, which must name
#     SOURCE_ROOT/plugin-api.
#
# Each build checks, from the compiler's dependency file, which duro.h it
# read.  Everything happens in a temporary directory, removed on exit.
set -eu

src=${1:?usage: out_of_tree.sh SOURCE_ROOT [BUILD_ROOT]}
src=$(cd "$src" && pwd)
build=$(cd "${2:-.}" && pwd)
cc=${CC:-cc}

fail() {
  echo "out_of_tree: $*" >&2
  exit 1
}

[ -f "$build/meson-private/install.dat" ] ||
  fail "$build is not a configured meson build directory"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/duro-oot.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

# The prefix the build directory installs to (meson's default, /usr/local,
# unless configured otherwise), and the staging directory in front of it.
stage=$tmp/stage
prefix=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"))')
root=$stage$prefix
libdir=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "libdir"))')
case $libdir in /*) ;; *) libdir=$prefix/$libdir ;; esac
# A sanitized build's libduro-test.so needs its sanitizers in the program
# that links it (the runtime must come first).
sanitize=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json, sys; v = next(o["value"] for o in json.load(sys.stdin) if o["name"] == "b_sanitize"); print("" if v == "none" else "-fsanitize=" + v)')

# 1. Install, as `make install DESTDIR=$stage` does; nothing is rebuilt.
meson install -C "$build" --no-rebuild --destdir "$stage" \
  >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log" >&2; fail "meson install failed"; }

for f in bin/duro include/duro.h share/pkgconfig/duro-plugin.pc \
  share/man/man1/duro.1 share/doc/duro/duro.service \
  share/doc/duro/template/Makefile share/doc/duro/template/duro.yaml \
  share/doc/duro/template/template.c share/doc/duro/template/template_test.c \
  include/duro-test.h "${libdir#"$prefix"/}/libduro-test.so" \
  "${libdir#"$prefix"/}/pkgconfig/duro-test.pc"; do
  [ -f "$root/$f" ] || fail "$prefix/$f not installed (under $stage)"
done
[ -x "$root/bin/duro" ] || fail "$prefix/bin/duro is not executable"
for f in Makefile duro.yaml template.c template_test.c; do
  cmp -s "$src/examples/template/$f" "$root/share/doc/duro/template/$f" ||
    fail "the installed template's $f differs from examples/template/$f"
done
grep -qx "ExecStart=$prefix/bin/duro run /etc/duro/duro.yaml" \
  "$root/share/doc/duro/duro.service" ||
  fail "duro.service does not run $prefix/bin/duro: $(grep ExecStart "$root/share/doc/duro/duro.service")"

# The man page: no groff warnings, and every command and option of
# `duro help` in it.  (Skipped, saying so, where groff is not installed.)
if command -v groff >/dev/null; then
  groff -man -Tascii -ww -rLL=300n -P-cbou "$root/share/man/man1/duro.1" \
    >"$tmp/duro.1.txt" 2>"$tmp/groff.log" || fail "groff failed on duro.1"
  [ ! -s "$tmp/groff.log" ] || { cat "$tmp/groff.log" >&2; fail "groff warns about duro.1"; }
  tr -s ' ' <"$tmp/duro.1.txt" >"$tmp/man.txt"
  "$root/bin/duro" help >"$tmp/help.txt"
  # "duro workflows instances list WF [--status S]" -> "workflows instances list"
  sed -nE 's/^(usage:)? *duro ((help|[a-z][a-z-]*( [a-z][a-z-]*)*)).*/\2/p' "$tmp/help.txt" |
    sort -u >"$tmp/commands.txt"
  [ "$(wc -l <"$tmp/commands.txt")" -ge 18 ] ||
    { cat "$tmp/help.txt" >&2; fail "read only $(wc -l <"$tmp/commands.txt") commands from duro help"; }
  while read -r c; do
    grep -qF "duro $c" "$tmp/man.txt" || fail "duro(1) does not describe \"duro $c\""
  done <"$tmp/commands.txt"
  grep -oE -- '--[a-z]+' "$tmp/help.txt" | sort -u >"$tmp/options.txt"
  while read -r o; do
    grep -qF -- "$o" "$tmp/man.txt" || fail "duro(1) does not describe $o"
  done <"$tmp/options.txt"
else
  echo "out_of_tree: groff not installed: the man page's text not checked"
fi

# The installed .pc, read from the staging directory.
installed_pkg_config() {
  PKG_CONFIG_PATH=$root/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage \
    pkg-config "$@"
}
cflags=$(installed_pkg_config --cflags duro-plugin) ||
  fail "pkg-config --cflags duro-plugin failed on the installed .pc"
echo "installed cflags: $cflags"
case " $cflags " in
*" -I$root/include "*) ;;
*) fail "the installed duro-plugin.pc does not name $prefix/include: $cflags" ;;
esac

# uses_header DEPFILE HEADER: the build read HEADER and no other duro.h.
uses_header() {
  grep -q "$2" "$1" || { cat "$1" >&2; fail "the build did not use $2"; }
  if grep -o '[^ ]*duro\.h' "$1" | grep -qv "^$2\$"; then
    cat "$1" >&2
    fail "the build read another duro.h than $2"
  fi
}

# 2. The template, copied and built by its own Makefile (which must pass
# -Werror), then checked by the installed host.
cp -R "$src/examples/template" "$tmp/myflow"
# (without what a build or run in examples/template may have left there)
rm -rf "$tmp/myflow/"*.so "$tmp/myflow/"*.o "$tmp/myflow/"*.d "$tmp/myflow/var"
(
  cd "$tmp/myflow"
  PKG_CONFIG_PATH=$root/share/pkgconfig PKG_CONFIG_SYSROOT_DIR=$stage \
    make CC="$cc" >"$tmp/make.log" 2>&1
) || { cat "$tmp/make.log" >&2; fail "the template's Makefile failed against the installed .pc"; }
grep -q -- "-Werror" "$tmp/make.log" || fail "the template was not built with -Werror"
uses_header "$tmp/myflow/template.d" "$root/include/duro.h"
(cd "$tmp/myflow" && "$root/bin/duro" check duro.yaml) ||
  fail "the installed duro check refused the template's duro.yaml"
[ ! -e "$tmp/myflow/var" ] || fail "duro check created $tmp/myflow/var"
(
  cd "$tmp/myflow"
  PKG_CONFIG_PATH=$root/share/pkgconfig:$stage$libdir/pkgconfig \
    PKG_CONFIG_SYSROOT_DIR=$stage LD_LIBRARY_PATH=$stage$libdir \
    make CC="$cc" CFLAGS="-O2 -g $sanitize" LDFLAGS="$sanitize" test \
    >"$tmp/test.log" 2>&1
) || { cat "$tmp/test.log" >&2; fail "the template's make test failed against the installed test kit"; }
grep -q "template_test: all passed" "$tmp/test.log" ||
  { cat "$tmp/test.log" >&2; fail "the template's tests did not say they passed"; }

# 3. The order flow: a plugin that reads its params and builds its
# results with duro.h's JSON accessors, built by hand from the staged .pc.
mkdir "$tmp/orders"
cp "$src/examples/orders/orders.c" "$tmp/orders/"
# shellcheck disable=SC2086 # the flags are lists of words
(cd "$tmp/orders" &&
  "$cc" -std=c11 -Wall -Wextra -Werror -fPIC -fvisibility=hidden \
    $cflags -MMD -MF orders.d -c orders.c -o orders.o &&
  "$cc" -shared -Wl,-z,defs orders.o -o liborders.so) ||
  fail "the out-of-tree build of orders.c failed"
uses_header "$tmp/orders/orders.d" "$root/include/duro.h"

# One exported symbol of its own: the descriptor entry.
syms=$(nm -D --defined-only "$tmp/orders/liborders.so" | awk '$2 == "T" || $2 == "D" || $2 == "B" { print $3 }' |
  grep -v -e '^_init$' -e '^_fini$' || true)
[ "$syms" = "duro_plugin" ] || fail "liborders.so exports \"$syms\", expected only duro_plugin"

cat >"$tmp/orders/duro.yaml" <<EOF
storage:
  path: $tmp/orders/var/duro.db
plugins:
  - name: orders
    path: $tmp/orders/liborders.so
    workflows:
      - { name: order-flow, binding: ORDER_FLOW, class_name: OrderFlow }
EOF
"$root/bin/duro" check "$tmp/orders/duro.yaml" || fail "installed duro check refused liborders.so"

# 4. The build tree, uninstalled: its .pc names the source's plugin-api/.
uninstalled=$(PKG_CONFIG_PATH=$build/meson-uninstalled pkg-config --cflags duro-plugin) ||
  fail "pkg-config --cflags duro-plugin fails with PKG_CONFIG_PATH=$build/meson-uninstalled"
uninstalled=$(printf '%s' "$uninstalled" | sed 's/ *$//')
echo "uninstalled cflags: $uninstalled"
[ "$uninstalled" = "-I$src/plugin-api" ] ||
  fail "the uninstalled duro-plugin.pc gives \"$uninstalled\", expected -I$src/plugin-api"
(
  cd "$tmp/myflow" && make clean >/dev/null &&
    PKG_CONFIG_PATH=$build/meson-uninstalled make CC="$cc" >"$tmp/make.log" 2>&1
) || { cat "$tmp/make.log" >&2; fail "the template's Makefile failed against the uninstalled .pc"; }
uses_header "$tmp/myflow/template.d" "$src/plugin-api/duro.h"
echo "out_of_tree: ok"
