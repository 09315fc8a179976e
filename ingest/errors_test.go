package ingest

import (
	"errors"
	"testing"
)

// TestInInput: an error about an input names it once: a *KeyError learns
// it, an error that names it already is left as it is (a column that
// cannot be a key said "lst.parquet: lst.parquet: column …"), any other
// is prefixed with it.
func TestInInput(t *testing.T) {
	for _, c := range []struct {
		err  error
		want string
	}{
		{&KeyError{Problem: ColumnZero, Item: "0"}, `lst.parquet: key 0: columns are numbered from 1`},
		{&ParquetError{Name: "lst.parquet", Column: "l.list.element", Err: ErrParquetUnsupported, Detail: "a repeated column"}, "lst.parquet: column l.list.element: unsupported in a Parquet key: a repeated column"},
		{&RecordError{Name: "lst.parquet", RowGroup: 1, Record: 3, Err: errors.New("column a is null")}, "lst.parquet: row group 0, row 3: column a is null"},
		{&ParquetError{Name: "other.parquet", Err: ErrParquetDamaged}, "lst.parquet: other.parquet: a damaged Parquet file"},
		{errors.New("short read"), "lst.parquet: short read"},
	} {
		if got := InInput(c.err, "lst.parquet").Error(); got != c.want {
			t.Errorf("%q, want %q", got, c.want)
		}
	}
}
