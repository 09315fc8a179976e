package pipeline

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/fpdedup/fpdedup/ingest"
)

// TestAppendSelected: the selected keys, each with the terminator, exactly
// as appendAnswer writes them one by one, for keys cut from one chunk the
// way query cuts them (its records less their terminators: lines ended by
// '\n' or NUL, csv records ended by "\r\n", which must not go out as read)
// and keys from elsewhere (a run must not reach across them); answers
// random, all present, all absent.
func TestAppendSelected(t *testing.T) {
	r := rand.New(rand.NewPCG(41, 42))
	for round := range 3000 {
		spec := ingest.KeySpec{Format: ingest.FormatLines, Term: '\n'}
		switch round % 3 {
		case 1:
			spec.Term = 0
		case 2:
			spec.Format = ingest.FormatCSV
		}
		var chunk []byte
		for range r.IntN(12) {
			chunk = append(chunk, "ab\x00\n,"[:r.IntN(5)]...)
			switch {
			case spec.Format == ingest.FormatCSV && r.IntN(3) == 0:
				chunk = append(chunk, '\r', '\n')
			case spec.Format == ingest.FormatCSV:
				chunk = append(chunk, '\n')
			default:
				chunk = append(chunk, spec.Term)
			}
		}
		var keys [][]byte
		ingest.SplitFormat(chunk, spec.Format, spec.Term, func(rec []byte) bool {
			keys = append(keys, spec.TrimEnd(rec))
			if r.IntN(8) == 0 { // a key copied elsewhere, as a joined key is
				keys = append(keys, bytes.Clone(keys[len(keys)-1]))
			}
			return true
		})
		found := make([]bool, len(keys))
		for i := range found {
			switch round % 5 {
			case 0:
				found[i] = true
			case 1:
			default:
				found[i] = r.IntN(2) == 0
			}
		}
		term := byte('\n')
		if spec.Format == ingest.FormatLines {
			term = spec.Term
		}
		for _, want := range []bool{true, false} {
			mode := QueryOnlyPresent
			if !want {
				mode = QueryOnlyAbsent
			}
			var ref []byte
			for i, key := range keys {
				ref = appendAnswer(ref, mode, found[i], key, term)
			}
			prefix := []byte("earlier output\n")
			got := appendSelected(bytes.Clone(prefix), keys, found, want, term)
			if !bytes.Equal(got, append(prefix, ref...)) {
				t.Fatalf("chunk %q, keys %q, found %v, want %v:\ngot  %q\nwant %q", chunk, keys, found, want, got, append(prefix, ref...))
			}
		}
	}
}
