#!/usr/bin/env bash
# fuzz.sh finds every fuzz target of the module and fuzzes each for FUZZTIME.
#
# A fuzz target is a `func FuzzXxx(f *testing.F)` in a *_test.go file of the
# module (directories the go tool skips are skipped: testdata, vendor, names
# starting with . or _, and nested modules). A file with a //go:build line
# that is a conjunction of tags ("a && b") is fuzzed with those tags (-tags
# a,b); a file whose constraint needs a tag in FUZZ_EXCLUDE_TAGS, or is not a
# plain conjunction (! or ||), is listed as skipped with the reason.
# hack/fuzzlist's test checks this list against a scan of the tree with
# go/parser, so a target can never be missed.
#
# Usage:
#   hack/fuzz.sh          fuzz every target (or those FUZZ matches), print a
#                         summary, exit 1 when any failed (a run that only
#                         hit Go's end-of-fuzztime race, go.dev/issue/75804,
#                         is reported as "race", not as a failure)
#   hack/fuzz.sh --list   print the targets, one a line:
#                           run <package dir> <FuzzXxx> <tags, or ->
#                           skip <package dir> <FuzzXxx> <reason>
#
# Environment:
#   FUZZTIME           how long each target is fuzzed (go test -fuzztime; 30s)
#   FUZZ               an extended regexp; only targets whose
#                      "<package dir>.<FuzzXxx>" it matches are run
#   FUZZ_PARALLEL      fuzzing workers per target (go test -parallel; default
#                      GOMAXPROCS)
#   FUZZ_EXCLUDE_TAGS  build tags whose targets are skipped (default "lab":
#                      test/e2e's TestMain brings a lab cluster up)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

FUZZTIME=${FUZZTIME:-30s}
FUZZ=${FUZZ:-}
FUZZ_PARALLEL=${FUZZ_PARALLEL:-}
FUZZ_EXCLUDE_TAGS=${FUZZ_EXCLUDE_TAGS:-lab}

# test_files prints the module's *_test.go files, sorted.
test_files() {
  local prune=(-name testdata -o -name vendor -o -name '.*' -o -name '_*')
  local d
  while IFS= read -r d; do
    prune+=(-o -path "$d")
  done < <(find . -mindepth 2 -name go.mod -printf '%h\n')
  find . -mindepth 1 -type d \( "${prune[@]}" \) -prune -o \
    -type f -name '*_test.go' ! -name '.*' ! -name '_*' -print | sed 's|^\./||' | LC_ALL=C sort
}

# constraint prints the file's //go:build expression (before its package
# clause), or nothing.
constraint() {
  awk '/^package /{exit} /^\/\/go:build /{sub(/^\/\/go:build /, ""); print; exit}' "$1"
}

# verdict prints "run <tags or ->" or "skip <reason>" for a constraint.
verdict() {
  local expr=$1
  if [[ -z $expr ]]; then
    echo "run -"
    return
  fi
  if [[ $expr == *'!'* || $expr == *'||'* || $expr == *'('* ]]; then
    echo "skip build constraint \"$expr\" is not a conjunction of tags"
    return
  fi
  local tags=() t x
  for t in ${expr//&&/ }; do
    for x in $FUZZ_EXCLUDE_TAGS; do
      if [[ $t == "$x" ]]; then
        echo "skip build tag $t is in FUZZ_EXCLUDE_TAGS ($FUZZ_EXCLUDE_TAGS)"
        return
      fi
    done
    tags+=("$t")
  done
  local IFS=,
  echo "run ${tags[*]}"
}

# list prints every target as --list describes.
list() {
  local file dir expr v name
  while IFS= read -r file; do
    grep -q '^func Fuzz' "$file" || continue
    dir=$(dirname "$file")
    expr=$(constraint "$file")
    v=$(verdict "$expr")
    while IFS= read -r name; do
      echo "${v%% *} $dir $name ${v#* }"
    done < <(sed -n -E 's/^func (Fuzz[A-Za-z0-9_]*)\([A-Za-z_][A-Za-z0-9_]* \*testing\.F\) \{.*/\1/p' "$file")
  done < <(test_files)
}

if [[ ${1:-} == --list ]]; then
  list
  exit 0
fi
if [[ $# -gt 0 ]]; then
  echo "usage: $0 [--list]" >&2
  exit 2
fi

# deadline_race reports whether a failed run's log shows only go1.26's
# fuzzing coordinator race at the end of -fuzztime (go.dev/issue/75804,
# fixed in Go 1.27): the target failed with "context deadline exceeded"
# and no failing input, and the package's tests passed otherwise.
deadline_race() {
  grep -qE '^    context deadline exceeded$' "$1" && ! grep -q 'Failing input written to' "$1" &&
    [[ $(grep -c -- '--- FAIL' "$1") -eq 1 ]]
}

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
summary=()
failed=0
raced=0
ran=0
start=$SECONDS
while read -r verb dir name rest; do
  if [[ -n $FUZZ ]] && ! [[ "$dir.$name" =~ $FUZZ ]]; then
    continue
  fi
  if [[ $verb == skip ]]; then
    summary+=("$(printf '%-5s %6s  %-45s %-28s %s' SKIP - "$dir" "$name" "$rest")")
    continue
  fi
  args=(-run '^$' -fuzz "^${name}\$" -fuzztime "$FUZZTIME")
  [[ $rest != - ]] && args+=(-tags "$rest")
  [[ -n $FUZZ_PARALLEL ]] && args+=(-parallel "$FUZZ_PARALLEL")
  echo "=== go test ${args[*]} ./$dir"
  t0=$SECONDS
  log="$logs/$ran.log"
  ran=$((ran + 1))
  if go test "${args[@]}" "./$dir" >"$log" 2>&1; then
    status=ok
  elif deadline_race "$log"; then
    status=race
    raced=$((raced + 1))
    tail -n 5 "$log"
  else
    status=FAIL
    failed=$((failed + 1))
    tail -n 40 "$log"
  fi
  execs=$(grep -oE 'elapsed: [^,]*, execs: [0-9]+' "$log" | tail -n 1 | sed -E 's/.*execs: //') || true
  summary+=("$(printf '%-5s %5ss  %-45s %-28s %s' "$status" "$((SECONDS - t0))" "$dir" "$name" "${execs:+$execs execs}")")
done < <(list)

echo
echo "fuzz summary (FUZZTIME=$FUZZTIME${FUZZ:+, FUZZ=$FUZZ}):"
printf '%s\n' "${summary[@]}"
echo "$ran run, $failed failed, $raced stopped by go.dev/issue/75804 (not failures), $((SECONDS - start))s"
if [[ $ran -eq 0 ]]; then
  echo "FUZZ=$FUZZ matches no fuzz target (hack/fuzz.sh --list lists them)" >&2
  exit 1
fi
[[ $failed -eq 0 ]]
