// Package fuzzlist proves that `make fuzz` (hack/fuzz.sh) runs every fuzz
// target in the tree: its test scans the module's test files with go/parser
// for the functions the go tool fuzzes, works out the build tags each needs,
// and requires `hack/fuzz.sh --list` to run each of them with those tags or
// to name why it skips it. It holds no code of its own.
package fuzzlist
