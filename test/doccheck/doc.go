// Package doccheck holds the test that keeps the docs' citations true:
// every file path, Go package, identifier and test name that docs/*.md,
// README.md and CONTRIBUTING.md cite in backticks must exist in the
// checkout (citations.go says which backticked text is a citation).
package doccheck
