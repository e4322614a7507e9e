#!/usr/bin/env bash
# Installs the system tools the tests need beyond Go when they are missing: qemu-img
# (Debian qemu-utils), which makes the small qcow2 disks the worker image tests wrap, and
# bats, which runs the command-line suites under e2e/.
set -euo pipefail
missing=()
command -v qemu-img >/dev/null 2>&1 || missing+=(qemu-utils)
command -v bats >/dev/null 2>&1 || missing+=(bats)
[[ ${#missing[@]} -eq 0 ]] && exit 0
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "testdeps: installing ${missing[*]}" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  exit 0
fi
echo "testdeps: missing ${missing[*]}: install them with your package manager" >&2
exit 1
