#!/usr/bin/env bash
# Build the proving-ground binaries into a version-keyed cache folder.
#   build.sh DEST   (e.g. ~/.cache/dask-gpu-parity/bin/v1.36.3)
# The build goes to DEST.partial and is renamed to DEST only after every binary built and
# MANIFEST was written, so DEST either is complete or does not exist. A DEST without a
# MANIFEST matching this script's versions is reported as stale and rebuilt.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
DEST="${1:?usage: build.sh DEST}"
# shellcheck source=versions.env
source "$here/versions.env"

JOBS="${JOBS:-$(nproc)}"
want="k8s=$K8S_VERSION kwok=$KWOK_VERSION helm=$HELM_VERSION"

if [[ -f "$DEST/MANIFEST" ]] && head -1 "$DEST/MANIFEST" | grep -qxF "$want"; then
  echo "controlplane: binaries for $want present in $DEST (reused)"
  exit 0
fi
if [[ -e "$DEST" ]]; then
  echo "controlplane: $DEST is stale or incomplete (MANIFEST missing or not '$want'); rebuilding" >&2
  rm -rf "$DEST"
fi

export CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-trimpath -mod=mod -buildvcs=false"
tmp="$DEST.partial"
rm -rf "$tmp"
mkdir -p "$tmp"
start=$(date +%s)

K="${K8S_VERSION#v}"
MINOR="$(cut -d. -f2 <<<"$K")"
LDF="-s -w \
 -X k8s.io/component-base/version.gitVersion=$K8S_VERSION \
 -X k8s.io/component-base/version.gitMajor=1 \
 -X k8s.io/component-base/version.gitMinor=$MINOR \
 -X k8s.io/component-base/version.gitTreeState=clean \
 -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION \
 -X k8s.io/client-go/pkg/version.gitMajor=1 \
 -X k8s.io/client-go/pkg/version.gitMinor=$MINOR \
 -X k8s.io/client-go/pkg/version.gitTreeState=clean"

echo "controlplane: building $want into $DEST (cold: ~20 min on 2 cores; see docs/proving-ground.md)"
(
  cd "$here"
  if [[ "$(go list -m -f '{{.Version}}' k8s.io/kubernetes)" != "$K8S_VERSION" ]]; then
    echo "controlplane: go.mod is not for $K8S_VERSION; run gen-gomod.sh $K8S_VERSION" >&2
    exit 1
  fi
  echo "+ k8s binaries ($(date +%T))"
  go build -p "$JOBS" -ldflags "$LDF" -o "$tmp/" \
    k8s.io/kubernetes/cmd/kube-apiserver \
    k8s.io/kubernetes/cmd/kube-controller-manager \
    k8s.io/kubernetes/cmd/kube-scheduler \
    k8s.io/kubernetes/cmd/kubectl
  echo "+ etcd $(go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3) ($(date +%T))"
  go build -p "$JOBS" -ldflags "-s -w" -o "$tmp/etcd" go.etcd.io/etcd/server/v3
)
# kwok and helm each resolve their own module graph (the k8s replaces would override theirs).
echo "+ kwok $KWOK_VERSION ($(date +%T))"
(cd /tmp && GOBIN="$tmp" go install -p "$JOBS" -ldflags "-s -w" "sigs.k8s.io/kwok/cmd/kwok@$KWOK_VERSION")
# The kwok binary embeds no Stages; kwokctl passes these "fast" ones (Ready nodes with lease
# heartbeats; Pods Running, Job pods Completed, deletions finished). Take them from the same module.
kwok_dir=$(cd /tmp && go mod download -json "sigs.k8s.io/kwok@$KWOK_VERSION" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')
for f in node/fast/node-initialize.yaml node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
  pod/fast/pod-ready.yaml pod/fast/pod-complete.yaml pod/fast/pod-delete.yaml; do
  echo "---"
  cat "$kwok_dir/kustomize/stage/$f"
done > "$tmp/kwok-stages.yaml"
echo "+ helm $HELM_VERSION ($(date +%T))"
(cd /tmp && GOBIN="$tmp" go install -p "$JOBS" \
  -ldflags "-s -w -X helm.sh/helm/v4/internal/version.version=$HELM_VERSION" \
  "helm.sh/helm/v4/cmd/helm@$HELM_VERSION")

secs=$(($(date +%s) - start))
{
  echo "$want"
  echo "built $(date -u +%FT%TZ) in ${secs}s with $(go version | cut -d' ' -f3) on $(nproc) cores"
  (cd "$tmp" && sha256sum kube-apiserver kube-controller-manager kube-scheduler kubectl etcd kwok helm kwok-stages.yaml)
} > "$tmp/MANIFEST"
mv "$tmp" "$DEST"
echo "controlplane: built $want in ${secs}s -> $DEST"
