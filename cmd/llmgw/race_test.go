//go:build race

package main

// The end-to-end tests build llmgw with the race detector when they run
// under it, so races in the real gateway fail the tests too.
func init() {
	buildFlags = append(buildFlags, "-race")
	raceBuild = true
}
