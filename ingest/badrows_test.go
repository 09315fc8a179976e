package ingest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// quarantineRun is a quarantining policy over Parquet inputs: open reads
// each file as the pipeline does and tells the policy of it.
type quarantineRun struct {
	t    *testing.T
	dir  string
	bad  *BadPolicy
	path string
}

func newQuarantineRun(t *testing.T) *quarantineRun {
	dir := t.TempDir()
	path := filepath.Join(dir, "q.parquet")
	bad, err := ParseOnBad("quarantine=" + path)
	if err != nil {
		t.Fatal(err)
	}
	return &quarantineRun{t: t, dir: dir, bad: bad, path: path}
}

// open opens input i, the file at path, and tells the policy of it; the
// file is closed before the run commits, as a reader closes its inputs.
func (q *quarantineRun) open(i int, path string) {
	q.t.Helper()
	f, err := os.Open(path)
	if err != nil {
		q.t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		q.t.Fatal(err)
	}
	p, err := OpenParquet(path, f, st.Size(), 64<<20)
	if err != nil {
		q.t.Fatal(err)
	}
	defer p.Close()
	if err := q.bad.ParquetSource(i, p, f, st.Size(), 64<<20); err != nil {
		q.t.Fatal(err)
	}
}

func (q *quarantineRun) badRow(i int, name string, group int, row int64) error {
	return q.bad.Handle(&RecordError{Name: name, Input: i, RowGroup: group, Record: row, Err: errors.New("column id is null")}, nil)
}

// commit ends the run as a success and reads back the rows quarantined.
func (q *quarantineRun) commit() ([]int64, error) {
	g := &atomicfile.Group{}
	if err := q.bad.Close(g, true); err != nil {
		g.Abort()
		return nil, err
	}
	if err := g.Commit(context.Background()); err != nil {
		return nil, err
	}
	rows, err := parquet.ReadFile[textRow](q.path)
	if err != nil {
		return nil, err
	}
	var ids []int64
	for _, r := range rows {
		ids = append(ids, r.ID)
	}
	return ids, nil
}

func (q *quarantineRun) write(name string, b []byte) string {
	q.t.Helper()
	path := filepath.Join(q.dir, name)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		q.t.Fatal(err)
	}
	return path
}

// A named input is opened again at commit, so a run over many inputs
// holds no descriptor for each: the rows come from the file read.
func TestQuarantineReopensNamedInputs(t *testing.T) {
	q := newQuarantineRun(t)
	a := q.write("a.parquet", textFile(t, textRows6))
	b := q.write("b.parquet", textFile(t, textRows6))
	q.open(0, a)
	q.open(1, b)
	for i, s := range q.bad.rows.sources {
		if s.f != nil {
			t.Errorf("input %d (%s): a descriptor is kept for a named file", i, s.name)
		}
	}
	// Rows 2 and 5 of a (row groups 1 and 2), row 6 of b.
	for _, e := range []struct {
		in    int
		name  string
		group int
		row   int64
	}{{1, b, 2, 6}, {0, a, 2, 5}, {0, a, 1, 2}} {
		if err := q.badRow(e.in, e.name, e.group, e.row); err != nil {
			t.Fatal(err)
		}
	}
	ids, err := q.commit()
	if err != nil {
		t.Fatal(err)
	}
	want := []int64{textRows6[1].ID, textRows6[4].ID, textRows6[5].ID}
	if !slices.Equal(ids, want) {
		t.Fatalf("quarantined ids %v, want %v", ids, want)
	}
}

// A named input replaced or rewritten before the run commits is an error,
// never rows of another file.
func TestQuarantineInputChanged(t *testing.T) {
	for _, how := range []string{"rewritten", "replaced", "rewritten in place, its mtime restored"} {
		t.Run(how, func(t *testing.T) {
			q := newQuarantineRun(t)
			a := q.write("a.parquet", textFile(t, textRows6))
			q.open(0, a)
			if err := q.badRow(0, a, 1, 2); err != nil {
				t.Fatal(err)
			}
			other := textFile(t, textRows6[:4])
			switch how {
			case "rewritten":
				q.write("a.parquet", other)
			case "rewritten in place, its mtime restored":
				st, err := os.Stat(a)
				if err != nil {
					t.Fatal(err)
				}
				b, err := os.ReadFile(a)
				if err != nil {
					t.Fatal(err)
				}
				b[len(b)/2] ^= 1
				time.Sleep(10 * time.Millisecond) // a ctime of its own
				q.write("a.parquet", b)
				if err := os.Chtimes(a, st.ModTime(), st.ModTime()); err != nil {
					t.Fatal(err)
				}
			default:
				if err := os.Rename(q.write("new.parquet", other), a); err != nil {
					t.Fatal(err)
				}
			}
			_, err := q.commit()
			if err == nil || !strings.Contains(err.Error(), "replaced or changed during the run") {
				t.Fatalf("got %v, want an error saying the input changed", err)
			}
			if _, err := os.Stat(q.path); !os.IsNotExist(err) {
				t.Fatalf("a quarantine file was published: %v", err)
			}
		})
	}
}

// A spool (a file with no name left) is kept open on a descriptor of the
// policy's own: its rows are still there after the reader closes it.
func TestQuarantineSpool(t *testing.T) {
	q := newQuarantineRun(t)
	spool := q.write("spool", textFile(t, textRows6))
	f, err := os.Open(spool)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(spool)
	st, _ := f.Stat()
	p, err := OpenParquet("-", f, st.Size(), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	if err := q.bad.ParquetSource(0, p, f, st.Size(), 64<<20); err != nil {
		t.Fatal(err)
	}
	p.Close()
	f.Close()
	if q.bad.rows.sources[0].f == nil {
		t.Fatal("no descriptor kept for a spool")
	}
	if err := q.badRow(0, "-", 2, 4); err != nil {
		t.Fatal(err)
	}
	ids, err := q.commit()
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{textRows6[3].ID}; !slices.Equal(ids, want) {
		t.Fatalf("quarantined ids %v, want %v", ids, want)
	}
}

// The bad rows of inputs of two schemas cannot be one file: refused at
// the first bad row of the second, naming both, not at commit.
func TestQuarantineMixedSchemas(t *testing.T) {
	q := newQuarantineRun(t)
	a := q.write("a.parquet", textFile(t, textRows6))
	var buf bytes.Buffer
	type other struct {
		ID int64 `parquet:"id"`
	}
	w := parquet.NewGenericWriter[other](&buf)
	if _, err := w.Write([]other{{1}, {2}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	b := q.write("b.parquet", buf.Bytes())
	q.open(0, a)
	q.open(1, b)
	if err := q.badRow(1, b, 1, 1); err != nil {
		t.Fatal(err)
	}
	err := q.badRow(0, a, 1, 2)
	if err == nil || !strings.Contains(err.Error(), "cannot be one file") || !strings.Contains(err.Error(), "a.parquet") || !strings.Contains(err.Error(), "b.parquet") {
		t.Fatalf("got %v, want the mixed schemas refused naming both files", err)
	}
	if _, err := q.commit(); err == nil {
		t.Fatal("the run committed after the refusal")
	}
}

// A bad row of a one-column file is a NULL in its only column, which has
// no csv or tsv row: a quarantine written as csv or tsv refuses it at
// that row, before the run's work, naming the file and row, and writes
// nothing; jsonl keeps it.
func TestQuarantineOneColumnText(t *testing.T) {
	var buf bytes.Buffer
	type one struct {
		ID int64 `parquet:"id"`
	}
	w := parquet.NewGenericWriter[one](&buf)
	if _, err := w.Write([]one{{1}, {2}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		format RowFormat
		refuse bool
	}{{RowsCSV, true}, {RowsTSV, true}, {RowsJSONL, false}} {
		q := newQuarantineRun(t)
		q.bad.WritesRows(c.format)
		b := q.write("one.parquet", buf.Bytes())
		q.open(0, b)
		err := q.badRow(0, b, 1, 2)
		if !c.refuse {
			if err != nil {
				t.Fatalf("format %d: %v", c.format, err)
			}
			continue
		}
		if err == nil || !errors.Is(err, ErrParquetNoText) || !strings.Contains(err.Error(), "one.parquet") || !strings.Contains(err.Error(), "row 2") {
			t.Fatalf("format %d: got %v, want the row refused naming file and row", c.format, err)
		}
		g := &atomicfile.Group{}
		if err := q.bad.Close(g, true); err != nil {
			t.Fatal(err)
		}
		if err := g.Commit(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(q.path); !os.IsNotExist(err) {
			t.Fatalf("format %d: a quarantine file after the refusal (%v)", c.format, err)
		}
	}
}
