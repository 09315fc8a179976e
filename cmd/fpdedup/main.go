// Command fpdedup builds, merges and queries exact fingerprint indexes and
// deduplicates event records with them. See README.md and `fpdedup --help`.
package main

import (
	"os"

	"github.com/fpdedup/fpdedup/internal/pipes"
)

func main() {
	pipes.Widen(os.Stdin, os.Stdout)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}
