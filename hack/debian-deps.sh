#!/usr/bin/env bash
# debian-deps.sh installs the Debian packages named as arguments that are not
# installed yet; with all of them present it only checks (about a second).
# The make targets that need packages call it, so each works on a fresh
# machine by itself. Safe to re-run.
set -euo pipefail

missing=()
for p in "$@"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "debian-deps: need root to install: ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}"; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
echo "debian-deps: installed ${missing[*]}"
