#!/usr/bin/env bash
# Regenerate go.mod/go.sum of the proving-ground tools module for one Kubernetes version.
# The staging `replace` block is derived from k8s.io/kubernetes@$K8S_VERSION's own go.mod
# (every `k8s.io/<x> => ./staging/src/...` becomes `k8s.io/<x> => k8s.io/<x> v0.<minor>.<patch>`),
# so it is never maintained by hand. Usage: gen-gomod.sh [vX.Y.Z]  (default: versions.env)
set -euo pipefail
cd "$(dirname "$0")"
# shellcheck source=versions.env
source ./versions.env
K8S_VERSION="${1:-$K8S_VERSION}"
K="${K8S_VERSION#v}"
S="v0.${K#1.}"
export GOTOOLCHAIN=local GOFLAGS=-mod=mod

upstream_mod=$(go mod download -json "k8s.io/kubernetes@v$K" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["GoMod"])')

rm -f go.mod go.sum
go mod init dask-gpu-parity/controlplane-tools >/dev/null 2>&1
go mod edit -go=1.26.0
go mod edit -require="k8s.io/kubernetes@v$K"
go mod edit -replace="k8s.io/kubernetes=k8s.io/kubernetes@v$K"
for m in $(sed -n 's#^[[:space:]]*\(k8s\.io/[^ ]*\) => \./staging/src/.*#\1#p' "$upstream_mod"); do
  go mod edit -replace="$m=$m@$S"
done
sed -i "s/^K8S_VERSION=.*/K8S_VERSION=$K8S_VERSION/" versions.env
go mod tidy
echo "generated go.mod for k8s $K8S_VERSION (staging $S): $(grep -c '=> k8s.io/' go.mod) replaces"
