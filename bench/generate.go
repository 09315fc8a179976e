package bench

import (
	"io"

	"github.com/fpdedup/fpdedup/bench/gen"
)

// The event generator is package bench/gen, which the product links
// without this harness. These names stay for the callers written before it
// moved (the tests of cmd/fpdedup); new code imports bench/gen.
type (
	GenOptions = gen.Options
	GenStats   = gen.Stats
)

// Generate is gen.Generate.
func Generate(w io.Writer, o GenOptions) (GenStats, error) { return gen.Generate(w, o) }
