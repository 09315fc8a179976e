package main

import (
	"os"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/fpdedup/fpdedup/internal/pqcraft"
)

func init() { scriptCmds["parquetlie"] = cmdParquetLie }

// parquetlie IN OUT values|required|int32 COLUMN, or IN OUT rows, writes
// OUT: the Parquet file IN with one lie in it (internal/pqcraft), as a
// two-byte patch or a crafted footer would make it:
//
//	values COLUMN    row group 0's first data page of COLUMN says one value less
//	required COLUMN  the footer says the nullable COLUMN is REQUIRED
//	int32 COLUMN     the footer says the INT64 COLUMN is INT32
//	rows             the footer says row group 0 has a row more
func cmdParquetLie(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 3 || (args[2] == "rows") != (len(args) == 3) || len(args) > 4 {
		ts.Fatalf("usage: parquetlie IN OUT values|required|int32 COLUMN | parquetlie IN OUT rows")
	}
	b, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	switch args[2] {
	case "values":
		err = pqcraft.DataPageValues(b, args[3], 0, -1)
	case "required":
		b, err = pqcraft.Required(b, args[3])
	case "int32":
		b, err = pqcraft.Int32(b, args[3])
	case "rows":
		b, err = pqcraft.RowGroupRows(b, 0, 1)
	default:
		ts.Fatalf("unknown lie %q", args[2])
	}
	ts.Check(err)
	ts.Check(os.WriteFile(ts.MkAbs(args[1]), b, 0o644))
}
