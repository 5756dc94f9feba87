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
  bind9-dnsutils netcat-openbsd iperf curl wget libpcre2-8-0 libssl3 zlib1g libcrypt1

# nginx and busybox for the test images, and Debian's prometheus (prometheus
# and promtool: test/chart checks the chart's alerts and dashboard with
# promtool, the lab e2e scrapes the lab with prometheus): each package is
# unpacked into the cache, never installed, so no nginx or prometheus service
# ever starts on this machine and no busybox package is replaced (the dynamic
# build is the one the images need: its shell looks commands up on PATH, the
# static build's runs its applets first).
debs=${ESTUARY_CACHE:-/var/cache/estuary}/debs
unpack() { # unpack PACKAGE FILE: unpack PACKAGE into $debs/PACKAGE-root unless FILE is there
  local pkg=$1 file=$2
  [ -x "$debs/$pkg-root/$file" ] && return 0
  mkdir -p "$debs"
  (cd "$debs" && rm -f "${pkg}"_*.deb && { apt-get download -qq "$pkg" 2>/dev/null || { apt-get update -qq && apt-get download -qq "$pkg"; }; })
  rm -rf "$debs/$pkg-root.tmp"
  dpkg-deb -x "$(ls -t "$debs/${pkg}"_*.deb | head -1)" "$debs/$pkg-root.tmp"
  rm -rf "$debs/$pkg-root"
  mv "$debs/$pkg-root.tmp" "$debs/$pkg-root"
  echo "lab-deps: unpacked $pkg into $debs/$pkg-root"
}
unpack nginx usr/sbin/nginx
unpack busybox bin/busybox
unpack prometheus usr/bin/promtool
