#!/usr/bin/env bash
# lab-deps.sh installs the Debian packages the estuary lab and the tests need
# (container runtime, reference CNI plugins, network tools, the router's BGP
# speaker). Safe to re-run; quick when everything is there.
set -euo pipefail
cd "$(dirname "$0")"

bash ./debian-deps.sh containerd runc containernetworking-plugins iproute2 iptables nftables \
  conntrack ipset bird2 iperf3 iputils-ping tcpdump util-linux procps

# The lab starts its own containerd and bird per node; the packaged services stay off.
for svc in containerd bird; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
    systemctl disable "$svc" >/dev/null 2>&1 || true
  fi
done
