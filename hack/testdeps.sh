#!/usr/bin/env bash
# Installs the system tools the tests need beyond Go when they are missing: qemu-img
# (Debian qemu-utils), which makes the small qcow2 disks the worker image tests wrap.
set -euo pipefail
if command -v qemu-img >/dev/null 2>&1; then exit 0; fi
if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null 2>&1; then
  echo "testdeps: installing qemu-utils (qemu-img)" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-utils >/dev/null
  exit 0
fi
echo "testdeps: qemu-img is missing: install qemu-utils (Debian/Ubuntu) or qemu (others)" >&2
exit 1
