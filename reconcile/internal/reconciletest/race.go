//go:build race

package reconciletest

// Under -race the fpdedup binary the tests run is built with -race too:
// most of reconcile's tests run the CLI, and a race in it would go unseen
// otherwise.
func init() { RaceBuild = true }
