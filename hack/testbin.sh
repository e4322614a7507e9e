#!/usr/bin/env bash
# Builds the control-plane binaries the tests run against (etcd and kube-apiserver,
# optionally kube-controller-manager and kube-scheduler) from the Go module proxy at pinned
# versions, caches them outside the clone keyed by version, and prints the folder that
# envtest takes as KUBEBUILDER_ASSETS.
#
# Usage: hack/testbin.sh [--all]     --all adds kube-controller-manager and kube-scheduler
#
# Why build from source: this project's CI has no internet except the module proxy, so
# the prebuilt envtest tarballs cannot be downloaded. A failed build exits non-zero; the
# tests that call this script then fail instead of skipping.
set -euo pipefail

KUBE_VERSION=${KUBE_VERSION:-v1.35.4}   # newest 1.35 patch seen served; CAPI v1.14 supports 1.35
ETCD_VERSION=${ETCD_VERSION:-v3.6.16}   # the etcd that kube-apiserver 1.35 is tested with

cache=${XDG_CACHE_HOME:-$HOME/.cache}/nodegroup-operator
kube_dir=$cache/kubernetes-$KUBE_VERSION
etcd_dir=$cache/etcd-$ETCD_VERSION
assets=$cache/envtest-$KUBE_VERSION-etcd-$ETCD_VERSION

want=(kube-apiserver)
if [[ ${1:-} == --all ]]; then want+=(kube-controller-manager kube-scheduler); fi

log() { printf 'testbin: %s\n' "$*" >&2; }

# Test packages run in parallel and each may call this script: one builds, the others
# wait for it instead of building the same binaries at once.
mkdir -p "$cache"
exec 9>"$cache/.testbin.lock"
if ! flock -n 9; then
  log "another build is running (lock $cache/.testbin.lock); waiting for it"
  flock 9
fi

build_etcd() {
  [[ -x $etcd_dir/etcd ]] && return 0
  local start=$SECONDS work
  work=$(mktemp -d)
  log "building etcd $ETCD_VERSION (about a minute on 2 cores)"
  (
    cd "$work"
    go mod init testbin/etcd >/dev/null 2>&1
    go mod edit -require "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
    go mod tidy >/dev/null 2>&1 || true
    go get "go.etcd.io/etcd/server/v3@$ETCD_VERSION" >&2
    mkdir -p "$etcd_dir.tmp"
    CGO_ENABLED=0 go build -trimpath -o "$etcd_dir.tmp/etcd" go.etcd.io/etcd/server/v3 >&2
  )
  rm -rf "$etcd_dir" && mv "$etcd_dir.tmp" "$etcd_dir"
  rm -rf "$work"
  log "etcd built in $((SECONDS - start))s"
}

build_kube() {
  local missing=()
  for b in "${want[@]}"; do [[ -x $kube_dir/$b ]] || missing+=("$b"); done
  [[ ${#missing[@]} -eq 0 ]] && return 0
  local start=$SECONDS work gomod
  work=$(mktemp -d)
  log "building ${missing[*]} $KUBE_VERSION (several minutes on 2 cores)"
  (
    cd "$work"
    go mod init testbin/kube >/dev/null 2>&1
    gomod=$(go mod download -json "k8s.io/kubernetes@$KUBE_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
    # k8s.io/kubernetes requires its staging modules at v0.0.0 and replaces them with local
    # folders; a consumer must replace them with the published v0.X.Y of the same release.
    local minor=${KUBE_VERSION#v1.}
    local args=(-require "k8s.io/kubernetes@$KUBE_VERSION")
    while read -r mod; do
      args+=(-replace "$mod=$mod@v0.$minor")
    done < <(awk '$2 == "v0.0.0" && $1 ~ /^k8s.io\// {print $1}' "$gomod" | sort -u)
    go mod edit "${args[@]}"
    {
      echo '//go:build tools'
      echo 'package tools'
      echo 'import ('
      for b in "${missing[@]}"; do echo "  _ \"k8s.io/kubernetes/cmd/$b\""; done
      echo ')'
    } > tools.go
    go mod tidy >&2
    local ldflags="-s -w"
    ldflags+=" -X k8s.io/component-base/version.gitVersion=$KUBE_VERSION"
    ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
    ldflags+=" -X k8s.io/component-base/version.gitMinor=${minor%%.*}"
    ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBE_VERSION"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitMinor=${minor%%.*}"
    mkdir -p "$kube_dir"
    local pkgs=()
    for b in "${missing[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$work/bin/" "${pkgs[@]}" >&2
    for b in "${missing[@]}"; do mv "$work/bin/$b" "$kube_dir/$b"; done
  )
  rm -rf "$work"
  log "${missing[*]} built in $((SECONDS - start))s"
}

build_etcd
build_kube

mkdir -p "$assets"
ln -sf "$etcd_dir/etcd" "$assets/etcd"
for b in kube-apiserver kube-controller-manager kube-scheduler; do
  [[ -x $kube_dir/$b ]] && ln -sf "$kube_dir/$b" "$assets/$b"
done
"$assets/kube-apiserver" --version >&2
echo "$assets"
