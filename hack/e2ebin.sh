#!/usr/bin/env bash
# Builds the binaries the end-to-end suites run beside the control plane, from the Go
# module proxy at pinned versions, cached outside the clone keyed by version:
#   - the Cluster API core manager (sigs.k8s.io/cluster-api, main package ./core),
#   - kwok (sigs.k8s.io/kwok/cmd/kwok), which keeps simulated Nodes alive,
#   - kubectl (k8s.io/kubectl), which the bats suite types as a user would,
# plus the CRD and webhook manifests and kwok stage files that ship in those modules.
# Prints the folder holding them (capi-manager, capi-crd/, capi-webhook.yaml, kwok,
# kwok-stages.yaml, kubectl).
#
# Why build from source: CI has no internet except the module proxy. A failed build exits
# non-zero and the e2e suites fail instead of skipping.
set -euo pipefail

CAPI_VERSION=${CAPI_VERSION:-v1.14.2}   # the Cluster API release the operator renders for
KWOK_VERSION=${KWOK_VERSION:-v0.8.0}    # newest kwok seen served; stages for Node and Pod
KUBECTL_VERSION=${KUBECTL_VERSION:-v1.35.4}  # same release as the test kube-apiserver

cache=${XDG_CACHE_HOME:-$HOME/.cache}/nodegroup-operator
capi_dir=$cache/cluster-api-$CAPI_VERSION
kwok_dir=$cache/kwok-$KWOK_VERSION
kubectl_dir=$cache/kubectl-$KUBECTL_VERSION
out=$cache/e2e-capi-$CAPI_VERSION-kwok-$KWOK_VERSION

log() { printf 'e2ebin: %s\n' "$*" >&2; }

mkdir -p "$cache"
exec 9>"$cache/.e2ebin.lock"
if ! flock -n 9; then
  log "another build is running (lock $cache/.e2ebin.lock); waiting for it"
  flock 9
fi

build_capi() {
  [[ -x $capi_dir/capi-manager && -d $capi_dir/crd && -f $capi_dir/webhook.yaml ]] && return 0
  local start=$SECONDS work src
  work=$(mktemp -d)
  log "building the Cluster API manager $CAPI_VERSION (about four minutes on 2 cores)"
  src=$(go mod download -json "sigs.k8s.io/cluster-api@$CAPI_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  [[ -n $src ]] || { log "sigs.k8s.io/cluster-api@$CAPI_VERSION not served by the module proxy"; exit 1; }
  # The module replaces sigs.k8s.io/cluster-api/api with ./api, which the module zip does
  # not hold: build a writable copy that takes the published api module instead.
  cp -r "$src" "$work/src"
  chmod -R u+w "$work/src"
  (
    cd "$work/src"
    go mod edit -replace "sigs.k8s.io/cluster-api/api=sigs.k8s.io/cluster-api/api@$CAPI_VERSION"
    go mod download sigs.k8s.io/cluster-api/api >&2
    go mod tidy >&2 2>/dev/null || true
    local minor=${CAPI_VERSION#v1.}
    local ldflags="-s -w"
    ldflags+=" -X sigs.k8s.io/cluster-api/version.gitVersion=$CAPI_VERSION"
    ldflags+=" -X sigs.k8s.io/cluster-api/version.gitMajor=1"
    ldflags+=" -X sigs.k8s.io/cluster-api/version.gitMinor=${minor%%.*}"
    ldflags+=" -X sigs.k8s.io/cluster-api/version.gitTreeState=clean"
    mkdir -p "$capi_dir.tmp"
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$capi_dir.tmp/capi-manager" ./core >&2
  )
  cp -r "$src/core/config/crd/bases" "$capi_dir.tmp/crd"
  cp "$src/core/config/webhook/manifests.yaml" "$capi_dir.tmp/webhook.yaml"
  chmod -R u+w "$capi_dir.tmp"
  rm -rf "$capi_dir" && mv "$capi_dir.tmp" "$capi_dir"
  rm -rf "$work"
  log "Cluster API manager built in $((SECONDS - start))s"
}

build_kwok() {
  [[ -x $kwok_dir/kwok && -f $kwok_dir/stages.yaml ]] && return 0
  local start=$SECONDS src
  log "building kwok $KWOK_VERSION (about three minutes on 2 cores)"
  mkdir -p "$kwok_dir.tmp"
  GOBIN="$kwok_dir.tmp" CGO_ENABLED=0 go install -trimpath "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION" >&2
  # Standalone kwok has no default stages; the module ships the Node and Pod lifecycles
  # that a kwok cluster loads by default (kustomize/stage/fast). Concatenate them into one
  # config.
  src=$(go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  : >"$kwok_dir.tmp/stages.yaml"
  for f in "$src"/kustomize/stage/node/fast/*.yaml "$src"/kustomize/stage/node/heartbeat-with-lease/*.yaml \
           "$src"/kustomize/stage/pod/fast/*.yaml; do
    [[ $(basename "$f") == kustomization.yaml ]] && continue
    printf -- '---\n' >>"$kwok_dir.tmp/stages.yaml"
    cat "$f" >>"$kwok_dir.tmp/stages.yaml"
  done
  grep -q 'kind: Stage' "$kwok_dir.tmp/stages.yaml" || { log "no kwok stages found in $src/kustomize/stage"; exit 1; }
  rm -rf "$kwok_dir" && mv "$kwok_dir.tmp" "$kwok_dir"
  log "kwok built in $((SECONDS - start))s"
}

build_kubectl() {
  [[ -x $kubectl_dir/kubectl ]] && return 0
  local start=$SECONDS work minor=${KUBECTL_VERSION#v1.}
  work=$(mktemp -d)
  log "building kubectl $KUBECTL_VERSION (a few minutes on 2 cores)"
  (
    # kubectl's command lives in k8s.io/kubectl; its main in k8s.io/kubernetes only wraps
    # it, and that module needs every staging module replaced. Wrap it the same way here.
    cd "$work"
    go mod init e2ebin/kubectl >/dev/null 2>&1
    cat >main.go <<'GO'
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
)

func main() { os.Exit(cli.Run(cmd.NewDefaultKubectlCommand())) }
GO
    go get "k8s.io/kubectl@v0.$minor" "k8s.io/component-base@v0.$minor" >&2
    go mod tidy >&2
    local ldflags="-s -w"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$KUBECTL_VERSION"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitMajor=1"
    ldflags+=" -X k8s.io/client-go/pkg/version.gitMinor=${minor%%.*}"
    ldflags+=" -X k8s.io/component-base/version.gitVersion=$KUBECTL_VERSION"
    mkdir -p "$kubectl_dir.tmp"
    CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$kubectl_dir.tmp/kubectl" . >&2
  )
  rm -rf "$kubectl_dir" && mv "$kubectl_dir.tmp" "$kubectl_dir"
  rm -rf "$work"
  log "kubectl built in $((SECONDS - start))s"
}

build_capi
build_kwok
build_kubectl

mkdir -p "$out"
ln -sfn "$capi_dir/capi-manager" "$out/capi-manager"
ln -sfn "$capi_dir/crd" "$out/capi-crd"
ln -sfn "$capi_dir/webhook.yaml" "$out/capi-webhook.yaml"
ln -sfn "$kwok_dir/kwok" "$out/kwok"
ln -sfn "$kwok_dir/stages.yaml" "$out/kwok-stages.yaml"
ln -sfn "$kubectl_dir/kubectl" "$out/kubectl"
"$out/capi-manager" --version >&2 2>/dev/null || true
echo "$out"
