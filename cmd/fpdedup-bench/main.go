// Command fpdedup-bench measures fpdedup beside its peers on generated data
// and writes report.json, report.md and charts (package bench). It is the
// one benchmark harness: the scripts in bench/ are presets of it. It is a
// command of its own so that the product, cmd/fpdedup, links none of its
// plotting, font and PDF libraries; make bench builds it into bin/.
package main

import (
	"os"

	"github.com/fpdedup/fpdedup/internal/pipes"
)

// The bound (fpdedup-bench bound) writes through the same wide pipe as
// fpdedup does: a floor must not pay a cost fpdedup avoids.
func main() {
	pipes.Widen(os.Stdin, os.Stdout)
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}
