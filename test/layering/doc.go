// Package layering holds the test that keeps the module's import graph in
// order: no product package imports test infrastructure (test/**), no two
// folders import each other in a circle, and each room imports only rooms of
// its own layer or of the layers below it (the layers are written as data in
// layering_test.go). It reads the graph with `go list -json ./...`.
package layering
