#!/usr/bin/env bash
# Installs what `make fuzz` needs beyond .ci/deps, if missing: clang and
# its libFuzzer runtime (-fsanitize=fuzzer), Debian 12's packages.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/deps
pkgs=(clang libclang-rt-14-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" ||
    missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
