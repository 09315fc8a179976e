package pipeline

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
)

// TestWriterPlan: the default --mem (half of a machine's RAM) takes the
// pipelined writer, a small --mem the sequential one, and what the sorter
// gets plus the writer's and the fixed reserves stays within --mem
// wherever --mem is larger than those reserves.
func TestWriterPlan(t *testing.T) {
	for _, c := range []struct {
		threads    int
		mem        int64
		sequential bool
	}{
		{2, 12 << 30, false}, {2, 1 << 30, false}, {2, 512 << 20, true}, {2, 256 << 20, true},
		{8, 1 << 30, true}, {8, 2 << 30, false}, {1, 512 << 20, false}, {1, 400 << 20, true},
	} {
		p := BuildOptions{Threads: c.threads, Mem: c.mem}.Plan()
		if p.Sequential != c.sequential {
			t.Errorf("threads %d, mem %d MiB: sequential %v, want %v", c.threads, c.mem>>20, p.Sequential, c.sequential)
		}
		if used := p.Sorter + p.Writer + 16<<20 + int64(c.threads)*8<<20; used > c.mem {
			t.Errorf("threads %d, mem %d MiB: sorter, writer and reserves take %d MiB", c.threads, c.mem>>20, used>>20)
		}
	}
}

// TestBuildWritersAgree: an index of four segments comes out byte for byte
// the same from the sequential writer (a small --mem) and the pipelined one.
func TestBuildWritersAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("four segments need 2.4M keys")
	}
	dir := t.TempDir()
	var in bytes.Buffer
	for i := range 2_500_000 {
		fmt.Fprintf(&in, "k%d\n", i%2_400_000)
	}
	input := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(input, in.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var files [][]byte
	for _, mem := range []int64{200 << 20, 4 << 30} {
		seq := BuildOptions{Threads: 2, Mem: mem}.Plan().Sequential
		if seq != (mem < 1<<30) {
			t.Fatalf("mem %d MiB: sequential %v", mem>>20, seq)
		}
		bad, _ := ingest.ParseOnBad("fail")
		out := filepath.Join(dir, fmt.Sprintf("%d.fpx", mem>>20))
		st, err := Build(context.Background(), BuildOptions{
			Inputs: []string{input}, Output: out, Threads: 2, Mem: mem, TmpDir: dir,
			Records: ingest.RecordOptions{Spec: ingest.KeySpec{Format: ingest.FormatLines, Term: '\n'}, Hash: ingest.XXH3, OnBad: bad},
			Spec:    fpstore.Spec{Hash: "xxh3"},
		})
		if err != nil {
			t.Fatalf("mem %d MiB (sequential %v): %v", mem>>20, seq, err)
		}
		if st.Distinct != 2_400_000 {
			t.Fatalf("mem %d MiB (sequential %v): %d distinct", mem>>20, seq, st.Distinct)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Fatal("the sequential and pipelined writers wrote different indexes")
	}
}
