package main

import (
	"fmt"
	"os"
	"regexp"
	"strconv"

	"github.com/parquet-go/parquet-go"
	"github.com/rogpeppe/go-internal/testscript"
)

func init() {
	scriptCmds["parquetgen"] = cmdParquetGen
	scriptCmds["memflags"] = cmdMemFlags
}

// parquetgen OUT COLS ROWS GROUPROWS writes OUT with the Go library: ROWS
// rows of COLS nullable INT64 columns c00000, c00001, … (row r's column c
// holds r*COLS+c%7, so c00000 is unique), GROUPROWS rows a row group.
func cmdParquetGen(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 4 {
		ts.Fatalf("usage: parquetgen OUT COLS ROWS GROUPROWS")
	}
	var n [3]int
	for i, a := range args[1:] {
		v, err := strconv.Atoi(a)
		ts.Check(err)
		n[i] = v
	}
	cols, rows, group := n[0], n[1], n[2]
	g := parquet.Group{}
	for c := range cols {
		g[fmt.Sprintf("c%05d", c)] = parquet.Optional(parquet.Int(64))
	}
	f, err := os.Create(ts.MkAbs(args[0]))
	ts.Check(err)
	w := parquet.NewWriter(f, parquet.NewSchema("t", g), parquet.MaxRowsPerRowGroup(int64(group)))
	row := make(parquet.Row, cols)
	for r := range rows {
		for c := range cols {
			row[c] = parquet.Int64Value(int64(r*cols+c%7)).Level(0, 1, c)
		}
		_, err := w.WriteRows([]parquet.Row{row})
		ts.Check(err)
	}
	ts.Check(w.Close())
	ts.Check(f.Close())
}

// memflags sets MEM and MAXRECORD to the --mem and --max-record the last
// command's stderr says to give ("give --mem NMiB [and --max-record
// MMiB] or more"), as --mem=NMiB and --max-record=MMiB (0 when it names
// none: an eighth of --mem, as the default is under that --mem).
func cmdMemFlags(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 0 {
		ts.Fatalf("usage: memflags")
	}
	m := regexp.MustCompile(`give --mem (\d+MiB)(?: and --max-record (\d+MiB))? or more`).FindStringSubmatch(ts.ReadFile("stderr"))
	if m == nil {
		ts.Fatalf("stderr names no --mem to give")
	}
	maxRecord := m[2]
	if maxRecord == "" {
		maxRecord = "0" // the longest --mem holds, as the default is under it
	}
	ts.Setenv("MEM", "--mem="+m[1])
	ts.Setenv("MAXRECORD", "--max-record="+maxRecord)
}
