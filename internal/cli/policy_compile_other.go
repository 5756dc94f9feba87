//go:build !linux

package cli

func hostVethName(string, string) string { return placeholderVeth }

func compilePolicy(policyObjects, string, string, []podEndpoint) (compiled, error) {
	return compiled{}, errNoCompile
}
