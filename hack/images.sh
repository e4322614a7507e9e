#!/usr/bin/env bash
# make images: the worker disk pipeline for one minor (MINOR, default: every minor) and
# architecture (ARCH, default amd64). It runs every step this machine can and names the
# ones that need a container engine (building the OS image, AuroraBoot), so it is useful
# both on a laptop without Docker and in the images workflow.
set -euo pipefail
cd "$(dirname "$0")/.."

ARCH=${ARCH:-amd64}
PUSH=${PUSH:-false}
tool() { go run ./cmd/nodegroup-images "$@"; }

echo "==> plan"
tool plan --arch "$ARCH"

engine=false
if command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; then engine=true; fi
if [[ $engine == false ]]; then
  echo
  echo "No container engine here (docker info fails). These steps need one and were not run:"
  echo "  - build the Kairos worker OS image (images/kairos-worker/Dockerfile)"
  echo "  - AuroraBoot: OS image -> raw EFI disk"
  echo "Everything else (plan, verify, wrap, push, pin) runs with nodegroup-images and is"
  echo "exercised by its tests against an in-process registry (go test ./internal/images/)."
  exit 0
fi

if [[ -z ${MINOR:-} ]]; then
  echo "MINOR is required to build (one minor per job)" >&2
  exit 2
fi
plan=$(tool plan --arch "$ARCH" --json)
build=$(jq -c --arg m "$MINOR" --arg a "$ARCH" '.builds[] | select(.minor == $m and .arch == $a)' <<<"$plan")
[[ -n $build ]] || { echo "no build for $MINOR/$ARCH in the plan" >&2; exit 2; }
field() { jq -r "$1" <<<"$build"; }
sum=$(field .kubeadm.sha512)
if [[ ! $sum =~ ^[0-9a-f]{128}$ ]]; then
  echo "the catalog has no kubeadm SHA-512 for $MINOR: record it with \`nodegroup-images sums --minor $MINOR\` in a reviewed change first" >&2
  exit 2
fi
work=$(mktemp -d)
tool verify --url "$(field .kubeadm.url)" --sha512 "$sum"
meta="$work/build.json"
docker buildx build --platform "linux/$ARCH" \
  --build-arg BASE_IMAGE="$(field .baseImage)" --build-arg KUBERNETES_VERSION="$(field .kubernetes)" \
  --build-arg KUBEADM_SHA512="$sum" --build-arg GO_IMAGE="${GO_IMAGE:?GO_IMAGE: the Go image of the release tree, by digest}" \
  --tag "$(field .osImage)" --push --metadata-file "$meta" images/kairos-worker
os_ref="$(field .osImage | sed 's/:[^:/]*$//')@$(jq -r '."containerimage.digest"' "$meta")"
docker run --rm -v "$work:/out" "${AURORABOOT_IMAGE:?AURORABOOT_IMAGE: AuroraBoot, by digest}" \
  --set "disk.efi=true" --set "state_dir=/out" "docker:$os_ref"
qemu-img convert -O qcow2 "$work"/*.raw "$work/disk.qcow2"
tool wrap --disk "$work/disk.qcow2" --os-image "$os_ref" --out "$work/layout"
if [[ $PUSH == true ]]; then
  disk_ref=$(tool push --layout "$work/layout" --tag "$(field .diskImage)" | tail -1)
  # Pin only from the images pulled back by digest (pin checks both).
  tool pin --minor "$MINOR" --disk "$disk_ref" --os-image "$os_ref"
fi
