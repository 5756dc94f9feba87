#!/usr/bin/env bash
# version.sh prints the version, commit and commit date `make build` stamps
# into the binaries (internal/version), one per line:
#   the checkout's tag vX.Y.Z without its v (git describe: X.Y.Z-N-gHASH past
#   it, -dirty with uncommitted changes), else 0.0.0-dev;
#   the full commit hash (unknown outside a git checkout);
#   the commit's date in UTC, RFC 3339 (unknown outside a git checkout).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if v=$(git describe --tags --match 'v[0-9]*.[0-9]*.[0-9]*' --dirty 2>/dev/null); then
  echo "${v#v}"
else
  echo 0.0.0-dev
fi
git rev-parse HEAD 2>/dev/null || echo unknown
TZ=UTC git show -s --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ HEAD 2>/dev/null || echo unknown
