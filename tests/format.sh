#!/usr/bin/env bash
# The format check: every C file in the tree as clang-format (.clang-format,
# LLVM style) would write it.  Prints the files that differ.
set -uo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "clang-format not installed"; exit 77; }
bad=0
while IFS= read -r f; do
  if ! clang-format --style=file --dry-run --Werror "$f" >/dev/null 2>&1; then
    echo "not formatted: $f (clang-format --style=file -i $f)"
    bad=1
  fi
done < <(git ls-files '*.c' '*.h' 2>/dev/null || find host tests bench plugins examples plugin-api -name '*.[ch]')
exit $bad
