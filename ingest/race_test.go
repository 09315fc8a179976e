//go:build race

package ingest

// raceBuild: the race detector maps terabytes of shadow memory, so a test
// cannot bound its address space under -race.
func init() { raceBuild = true }
