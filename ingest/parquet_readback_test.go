package ingest

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
	"github.com/fpdedup/fpdedup/internal/pqcraft"
)

// TestParquetOutputReadBack: a Parquet output written to a file about to
// be published is read back as written (its footer, schema and row
// counts) before it is made durable. The copy of every row of
// types.parquet reads back and is published; the same copy whose footer
// changed on disk between its writing and its publishing (a row group
// saying one row less, as a lost write or a writer's bug would leave it)
// is refused, naming the output, and nothing is published.
func TestParquetOutputReadBack(t *testing.T) {
	in := openFixture(t, "types.parquet")
	for _, tc := range []struct {
		name   string
		damage bool
	}{{"as written", false}, {"a row group a row short on disk", true}} {
		t.Run(tc.name, func(t *testing.T) {
			target := filepath.Join(t.TempDir(), "out.parquet")
			f, err := atomicfile.Create(target)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Abort()
			bw := bufio.NewWriter(f)
			w := NewRowWriter(ReadBackWriter{bw, f}, RowsAsRead)
			defer w.Abort()
			if err := w.Schema(in); err != nil {
				t.Fatal(err)
			}
			row := int64(1)
			for g := range in.RowGroups() {
				var rows []int64
				for range in.file.RowGroups()[g].NumRows() {
					rows = append(rows, row)
					row++
				}
				if err := w.Write(in, g, rows); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			if err := bw.Flush(); err != nil {
				t.Fatal(err)
			}
			if tc.damage {
				b, err := os.ReadFile(f.Name())
				if err != nil {
					t.Fatal(err)
				}
				lie, err := pqcraft.RowGroupRows(b, 1, -1)
				if err != nil || len(lie) != len(b) {
					t.Fatalf("the footer rewritten: %d bytes for %d, %v", len(lie), len(b), err)
				}
				if err := os.WriteFile(f.Name(), lie, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var g atomicfile.Group
			err = g.Finish(f)
			if !tc.damage {
				if err != nil {
					t.Fatal(err)
				}
				if err := g.Commit(t.Context()); err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(target)
				if err != nil || readParquetKeys(b, 64<<20) != nil {
					t.Fatalf("the output published does not read: %v", err)
				}
				return
			}
			var pe *ParquetError
			if !errors.As(err, &pe) || !errors.Is(err, ErrParquetOutput) || pe.Name != target {
				t.Fatalf("not refused as an output that does not read back: %T %v", err, err)
			}
			t.Log(err)
			g.Abort()
			if _, err := os.Stat(target); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("published: %v", err)
			}
			if left, _ := filepath.Glob(filepath.Join(filepath.Dir(target), "*")); len(left) != 0 {
				t.Fatalf("debris: %v", left)
			}
		})
	}
}
