#!/usr/bin/env bash
# lab-deps.sh installs the Debian packages the estuary lab and the tests need
# (container runtime, reference CNI plugins, network tools, the router's BGP
# speaker, the programs the lab packs into the upstream test images), and
# unpacks Debian's nginx (never installed as a host service) for the nginx test
# image. Safe to re-run; quick when everything is there.
set -euo pipefail
cd "$(dirname "$0")"

bash ./debian-deps.sh containerd runc containernetworking-plugins iproute2 iptables nftables \
  conntrack ipset bird2 iperf3 iputils-ping tcpdump util-linux procps \
  busybox-static bind9-dnsutils netcat-openbsd iperf curl libpcre2-8-0 libssl3 zlib1g libcrypt1

# nginx for the nginx test image: the package is unpacked into the cache, so no
# nginx service ever starts on this machine.
debs=${ESTUARY_CACHE:-/var/cache/estuary}/debs
if [ ! -x "$debs/nginx-root/usr/sbin/nginx" ]; then
  mkdir -p "$debs"
  (cd "$debs" && { apt-get download -qq nginx 2>/dev/null || { apt-get update -qq && apt-get download -qq nginx; }; })
  rm -rf "$debs/nginx-root.tmp"
  dpkg-deb -x "$(ls -t "$debs"/nginx_*.deb | head -1)" "$debs/nginx-root.tmp"
  mv "$debs/nginx-root.tmp" "$debs/nginx-root"
  echo "lab-deps: unpacked nginx into $debs/nginx-root"
fi

# The lab starts its own containerd and bird per node; the packaged services stay off.
for svc in containerd bird; do
  if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet "$svc" 2>/dev/null; then
    systemctl stop "$svc" || true
    systemctl disable "$svc" >/dev/null 2>&1 || true
  fi
done
