//go:build race

package reconcile_test

// Under -race, TestMain builds the fpdedup binary with -race too: most
// tests here run the CLI, and a race in it would go unseen otherwise.
func init() { raceBuild = true }
