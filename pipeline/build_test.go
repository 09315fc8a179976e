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

// TestWriterPlan: the pipelined writer is chosen only where its segments
// take at most a quarter of --mem, and the writer, chunk buffers and
// runtime reserve never leave the sorter more than --mem.
func TestWriterPlan(t *testing.T) {
	for _, threads := range []int{1, 2, 8} {
		for _, mem := range []int64{64 << 20, 256 << 20, 1 << 30, 12 << 30} {
			seq, writer := writerPlan(threads, mem)
			if !seq && 4*writer > mem {
				t.Errorf("threads %d, mem %d MiB: pipelined writer of %d MiB", threads, mem>>20, writer>>20)
			}
			if seq != (4*int64(threads+2)*segmentMemory > mem) {
				t.Errorf("threads %d, mem %d MiB: sequential %v", threads, mem>>20, seq)
			}
			if b := sorterBudget(threads, mem); b <= 0 || b > mem {
				t.Errorf("threads %d, mem %d MiB: sorter budget %d", threads, mem>>20, b)
			}
		}
	}
}

// TestBuildWritersAgree: an index of three segments comes out byte for byte
// the same from the sequential writer (a small --mem) and the pipelined one.
func TestBuildWritersAgree(t *testing.T) {
	if testing.Short() {
		t.Skip("three segments need 2.5M keys")
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
		seq, _ := writerPlan(2, mem)
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
