#!/usr/bin/env bash
# lab-deps.sh installs the Debian packages the estuary lab needs (container runtime,
# reference CNI plugins, network tools, the router's BGP speaker). Safe to re-run.
set -euo pipefail

PKGS=(containerd runc containernetworking-plugins iproute2 iptables nftables
      conntrack ipset bird2 iperf3 iputils-ping tcpdump util-linux procps)

missing=()
for p in "${PKGS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "lab-deps: all packages present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "lab-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y --no-install-recommends "${missing[@]}"; then
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
# The lab starts its own containerd and bird per node; the packaged services stay off.
for svc in containerd bird; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
    systemctl disable "$svc" >/dev/null 2>&1 || true
  fi
done
echo "lab-deps: installed ${missing[*]}"
