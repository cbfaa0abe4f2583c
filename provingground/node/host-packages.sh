#!/usr/bin/env bash
# The Debian packages a real node needs on the build/test machine, installed when missing:
# libseccomp-dev (runc's static seccomp build), iptables (kube-proxy's iptables mode and the
# node's clean-up), nftables (nft: the clean-up of tables iptables-nft makes), iproute2 (ip:
# removing the node's bridge). Elsewhere it only says what is missing. Packages given as
# arguments replace that list (`make images` asks for debootstrap, which makes the image bases).
set -euo pipefail
want=(libseccomp-dev iptables nftables iproute2)
(($#)) && want=("$@")
missing=()
for p in "${want[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
((${#missing[@]})) || exit 0
if ! command -v apt-get >/dev/null; then
  echo "install ${missing[*]} (not a Debian-like system: not installed here)" >&2
  exit 1
fi
echo "+ apt-get install -y ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
