#!/usr/bin/env bash
# Build a real node's binaries from Go modules (provingground/node/, docs/proving-ground.md):
#   build.sh --node DEST   the proving ground's node (`make node`): no GPU parts, no bundle
#   build.sh DEST          the GPU node for the GPU machine (`make gpunode`, DEST .gpunode)
#   build.sh --dra DEST    the DRA GPU plugin alone (`make node`: its own cache, draplugin/)
# DEST/bin/   the binaries, stripped:  k8s (multi-call: etcd kube-apiserver kube-controller-manager
#             kube-scheduler kubelet kube-proxy kubectl), containerd (multi-call: containerd ctr),
#             containerd-shim-runc-v2, runc, CNI plugins (bridge host-local loopback), coredns,
#             pause; for the GPU node also nvidia-device-plugin, nvidia-ctk (also the CDI hook:
#             `nvidia-ctk hook ...`), dra-gpu-plugin (draplugin/: the stand-in DRA kubelet plugin)
# DEST/bundle/{k8s,rest}.tar.xz   (GPU node) DEST/bin in two xz archives: what is carried there
# DEST/MANIFEST   versions, sizes and sha256 of each binary (written last)
# Each binary is rebuilt only when missing (delete DEST/bin/NAME, or DEST, to rebuild).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
GPU=1
DRA_ONLY=0
if [[ "${1:-}" == "--node" ]]; then
  GPU=0
  shift
elif [[ "${1:-}" == "--dra" ]]; then
  DRA_ONLY=1
  shift
fi
DEST="$(mkdir -p "${1:?usage: build.sh DEST}" && cd "$1" && pwd)"
# shellcheck source=../tools/versions.env
source "$here/../tools/versions.env"
# shellcheck source=versions.env
source "$here/versions.env"
JOBS="${JOBS:-$(nproc)}"
BIN="$DEST/bin"
mkdir -p "$BIN" "$DEST/bundle"
export GOTOOLCHAIN=local GOFLAGS="-trimpath -mod=mod -buildvcs=false"
start=$(date +%s)
need() { [[ ! -s "$BIN/$1" ]]; }
say() { echo "+ $* ($(date +%T))"; }

# The stand-in DRA kubelet plugin (draplugin/main.go says why NVIDIA's driver is not built):
# cgo for go-nvml's dlopen of libnvidia-ml.so.1, lazy binding as NVIDIA's Makefiles.
if ((GPU || DRA_ONLY)) && need dra-gpu-plugin; then
  say "dra-gpu-plugin (draplugin/)"
  (cd "$here/draplugin" && CGO_ENABLED=1 go build -p "$JOBS" -o "$BIN/dra-gpu-plugin" \
    -ldflags "-s -w -extldflags=-Wl,-z,lazy" .)
fi
if ((DRA_ONLY)); then
  echo "dra-gpu-plugin: done in $(($(date +%s) - start))s -> $BIN/dra-gpu-plugin"
  exit 0
fi

K="$K8S_VERSION"
MINOR="$(cut -d. -f2 <<<"${K#v}")"
if need k8s; then
  say "k8s multi-call $K (etcd kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)"
  (cd "$here/k8s" && CGO_ENABLED=0 go build -p "$JOBS" -o "$BIN/k8s" -ldflags "-s -w \
    -X k8s.io/component-base/version.gitVersion=$K -X k8s.io/component-base/version.gitMajor=1 \
    -X k8s.io/component-base/version.gitMinor=$MINOR -X k8s.io/component-base/version.gitTreeState=clean \
    -X k8s.io/client-go/pkg/version.gitVersion=$K -X k8s.io/client-go/pkg/version.gitMajor=1 \
    -X k8s.io/client-go/pkg/version.gitMinor=$MINOR -X k8s.io/client-go/pkg/version.gitTreeState=clean" .)
fi

# Each of the rest resolves its own module graph (go install pkg@version, outside any module).
install() { # install CGO NAME PKG@VERSION LDFLAGS [TAGS]
  local cgo="$1" name="$2" pkg="$3" ldf="$4" tags="${5:-}"
  need "$name" || return 0
  say "$name $pkg"
  local gobin
  gobin="$(mktemp -d)"
  (cd /tmp && CGO_ENABLED="$cgo" GOBIN="$gobin" go install -p "$JOBS" -tags "$tags" -ldflags "-s -w $ldf" "$pkg")
  mv "$gobin"/* "$BIN/$name"
  rmdir "$gobin"
}
CTRD=github.com/containerd/containerd/v2
CTRD_LDF="-X $CTRD/version.Version=$CONTAINERD_VERSION -X $CTRD/version.Package=$CTRD"
# urfave_cli_no_docs and no_btrfs as containerd's own release builds for static binaries.
# containerd and ctr: one multi-call binary (containerd/main.go), from the wrapper module.
if need containerd; then
  say "containerd+ctr multi-call $CONTAINERD_VERSION"
  (cd "$here/containerd" &&
    [[ "$(go list -m -f '{{.Version}}' $CTRD)" == "$CONTAINERD_VERSION" ]] &&
    CGO_ENABLED=0 go build -p "$JOBS" -tags "urfave_cli_no_docs no_btrfs" -o "$BIN/containerd" \
      -ldflags "-s -w $CTRD_LDF" .)
fi
install 0 containerd-shim-runc-v2 "$CTRD/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" "$CTRD_LDF" \
  "urfave_cli_no_docs no_btrfs"
# runc needs cgo (libcontainer/nsenter) and seccomp: containerd gives every pod sandbox the
# RuntimeDefault profile, which a runc without seccomp refuses ("config provided but seccomp not
# supported"). Linked statically (glibc and libseccomp.a from libseccomp-dev), as runc's releases.
if need runc && [[ ! -f /usr/lib/x86_64-linux-gnu/libseccomp.a ]]; then
  echo "runc: needs libseccomp.a (apt-get install libseccomp-dev)" >&2
  exit 1
fi
install 1 runc "github.com/opencontainers/runc@$RUNC_VERSION" \
  "-X main.version=${RUNC_VERSION#v} -X main.gitCommit=module -extldflags=-static" "seccomp"
for p in main/bridge main/loopback ipam/host-local; do
  install 0 "$(basename "$p")" "github.com/containernetworking/plugins/plugins/$p@$CNI_PLUGINS_VERSION" \
    "-X github.com/containernetworking/plugins/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION"
done
# CoreDNS with the plugins the cluster DNS uses (coredns/main.go), from its wrapper module; the GPU
# node runs it too with `node.py --chart` (kube-proxy there uses carried iptables).
if need coredns; then
  say "coredns $COREDNS_VERSION"
  (cd "$here/coredns" &&
    [[ "$(go list -m -f '{{.Version}}' github.com/coredns/coredns)" == "$COREDNS_VERSION" ]] &&
    CGO_ENABLED=0 go build -p "$JOBS" -o "$BIN/coredns" \
      -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" .)
fi
if need pause; then
  say "pause (static C, like registry.k8s.io/pause)"
  gcc -Os -static -s -o "$BIN/pause" "$here/pause/pause.c"
fi
manifest() {
  {
    echo "k8s=$K8S_VERSION containerd=$CONTAINERD_VERSION runc=$RUNC_VERSION cni=$CNI_PLUGINS_VERSION" \
      "coredns=$COREDNS_VERSION" \
      "$( ((GPU)) && echo "device-plugin=$DEVICE_PLUGIN_VERSION nvidia-ctk=$NVIDIA_CTK_VERSION dra-gpu-plugin=draplugin/")"
    echo "etcd $(cd "$here/k8s" && go list -m -f '{{.Version}}' go.etcd.io/etcd/server/v3)"
    echo "built $(date -u +%FT%TZ) with $(go version | cut -d' ' -f3) on $(nproc) cores"
    (cd "$BIN" && for f in "$@"; do
      printf '%10d  %s  %s\n' "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)" "$f"
    done)
  } >"$DEST/MANIFEST.partial"
}
if ((!GPU)); then
  manifest k8s containerd containerd-shim-runc-v2 runc bridge host-local loopback coredns pause
  mv "$DEST/MANIFEST.partial" "$DEST/MANIFEST"
  cat "$DEST/MANIFEST"
  echo "node: done in $(($(date +%s) - start))s -> $DEST"
  exit 0
fi

# go-nvml binds libnvidia-ml.so.1 with dlopen: cgo, and lazy binding as NVIDIA's own Makefiles do.
# The device plugin from its wrapper module (deviceplugin/tools.go says why not go install).
DP=github.com/NVIDIA/k8s-device-plugin
if need nvidia-device-plugin; then
  say "nvidia-device-plugin $DP $DEVICE_PLUGIN_VERSION"
  (cd "$here/deviceplugin" &&
    [[ "$(go list -m -f '{{.Version}}' $DP)" == "$DEVICE_PLUGIN_VERSION" ]] &&
    CGO_ENABLED=1 go build -p "$JOBS" -o "$BIN/nvidia-device-plugin" \
      -ldflags "-s -w -extldflags=-Wl,-z,lazy -X $DP/internal/info.version=$DEVICE_PLUGIN_VERSION" \
      $DP/cmd/nvidia-device-plugin)
fi
TK=github.com/NVIDIA/nvidia-container-toolkit
install 1 nvidia-ctk "$TK/cmd/nvidia-ctk@$NVIDIA_CTK_VERSION" \
  "-extldflags=-Wl,-z,lazy -X $TK/internal/info.version=${NVIDIA_CTK_VERSION#v}"

# Two xz archives, made in parallel: the multi-call k8s binary alone (kept while k8s is not
# rebuilt), and the rest in one stream whose dictionary holds them all, so the Go runtime, gRPC,
# protobuf and client-go code they share is stored once. Similar binaries sit next to each other.
say "bundle"
REST="nvidia-device-plugin dra-gpu-plugin nvidia-ctk containerd containerd-shim-runc-v2 runc bridge host-local loopback coredns pause"
B="$DEST/bundle"
rm -f "$B"/*.partial
pids=()
if [[ ! -s "$B/k8s.tar.xz" || "$BIN/k8s" -nt "$B/k8s.tar.xz" ]]; then
  (tar -C "$BIN" -cf - k8s | xz -T1 -6 >"$B/k8s.tar.xz.partial" && mv "$B/k8s.tar.xz.partial" "$B/k8s.tar.xz") &
  pids+=($!)
fi
(tar -C "$BIN" -cf - $REST | xz -T1 --lzma2=preset=6,dict=192MiB >"$B/rest.tar.xz.partial" &&
  mv "$B/rest.tar.xz.partial" "$B/rest.tar.xz") &
pids+=($!)
for pid in "${pids[@]}"; do wait "$pid"; done
echo "k8s $REST" | tr ' ' '\n' >"$B/FILES"
# shellcheck disable=SC2046  # one word per file
manifest $(cat "$B/FILES")
(cd "$B" && for f in k8s.tar.xz rest.tar.xz; do printf '%10d  bundle/%s\n' "$(stat -c %s "$f")" "$f"; done) \
  >>"$DEST/MANIFEST.partial"
mv "$DEST/MANIFEST.partial" "$DEST/MANIFEST"
cat "$DEST/MANIFEST"
echo "gpunode: done in $(($(date +%s) - start))s -> $DEST"
