#!/usr/bin/env bash
# Build BuildKit's buildkitd and buildctl from the Go module proxy into a version-keyed cache:
#   buildkit.sh DEST    (e.g. ~/.cache/dask-gpu-parity/bin/buildkit-v0.34.2; `make images` passes it)
# Built into DEST.partial and renamed to DEST once both binaries and MANIFEST exist, so DEST is
# complete or absent; an existing DEST is reused.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
DEST="${1:?usage: buildkit.sh DEST}"
# shellcheck source=versions.env
source "$here/versions.env"
if [[ -s "$DEST/MANIFEST" ]] && head -1 "$DEST/MANIFEST" | grep -qxF "buildkit=$BUILDKIT_VERSION"; then
  exit 0
fi
rm -rf "$DEST" "$DEST.partial"
mkdir -p "$DEST.partial"
start=$(date +%s)
echo "images: building BuildKit $BUILDKIT_VERSION into $DEST (cold: several minutes on 2 cores)"
BK=github.com/moby/buildkit
# Built inside its own module (read-only, in the module cache): its go.mod has exclude directives,
# which `go install pkg@version` refuses. No vendor folder there, so the go.sum it ships decides.
src="$(cd /tmp && GOFLAGS=-mod=mod go mod download -json "$BK@$BUILDKIT_VERSION" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["Dir"])')"
(cd "$src" && CGO_ENABLED=0 GOTOOLCHAIN=local GOFLAGS="-trimpath -mod=readonly -buildvcs=false" \
  go build -p "${JOBS:-$(nproc)}" -o "$DEST.partial/" \
  -ldflags "-s -w -X $BK/version.Version=$BUILDKIT_VERSION -X $BK/version.Package=$BK" \
  ./cmd/buildkitd ./cmd/buildctl)
{
  echo "buildkit=$BUILDKIT_VERSION"
  echo "built $(date -u +%FT%TZ) in $(($(date +%s) - start))s with $(go version | cut -d' ' -f3) on $(nproc) cores"
  (cd "$DEST.partial" && sha256sum buildkitd buildctl)
} >"$DEST.partial/MANIFEST"
mv "$DEST.partial" "$DEST"
cat "$DEST/MANIFEST"
