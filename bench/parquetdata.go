package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/parquet-go/parquet-go"
)

// parquetEvent is a row of events.parquet: the generator's CSV record
// typed as a data lake holds it. The key columns' text is the CSV fields'
// (strings as their bytes, timestamp_ms as its stored integer), so an
// index built from either file holds the same fingerprints.
type parquetEvent struct {
	UserID      string `parquet:"user_id,dict"`
	DeviceID    string `parquet:"device_id,dict"`
	TimestampMs int64  `parquet:"timestamp_ms,timestamp(millisecond)"`
	EventType   string `parquet:"event_type,dict"`
	Amount      int64  `parquet:"amount,decimal(2:18)"` // cents
}

// parquetKey is the key of the Parquet jobs, as the CSV jobs' csvKey
// numbers it.
const parquetKey = "user_id,device_id,timestamp_ms"

// parquetAllColumns keys a row by all its columns: two files that give
// the same count lines for it hold the same rows in the same order.
const parquetAllColumns = "user_id,device_id,timestamp_ms,event_type,amount"

// parquetRowGroup is DuckDB's default row group size, which the issue's
// figures assume.
const parquetRowGroup = 122_880

// writeParquetEvents writes the records of the generator's CSV file csv
// (header first) to out as zstd Parquet, row groups of parquetRowGroup rows,
// and returns its size and what its largest row group takes decoded
// (rowGroupDecoded).
func writeParquetEvents(ctx context.Context, csv, out string) (size, rowGroup int64, err error) {
	in, err := os.Open(csv)
	if err != nil {
		return 0, 0, err
	}
	defer in.Close()
	f, err := os.Create(out)
	if err != nil {
		return 0, 0, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	w := parquet.NewGenericWriter[parquetEvent](bw, parquet.Compression(&parquet.Zstd), parquet.MaxRowsPerRowGroup(parquetRowGroup))
	sc := bufio.NewScanner(bufio.NewReaderSize(in, 1<<20))
	rows := make([]parquetEvent, 0, 4096)
	flush := func() error {
		_, err := w.Write(rows)
		rows = rows[:0]
		return err
	}
	line := 0
	for sc.Scan() {
		line++
		if line == 1 {
			continue // the header
		}
		e, err := parseEvent(sc.Bytes())
		if err != nil {
			return 0, 0, fmt.Errorf("bench: %s:%d: %w", csv, line, err)
		}
		if rows = append(rows, e); len(rows) == cap(rows) {
			if err := ctx.Err(); err != nil {
				return 0, 0, context.Cause(ctx)
			}
			if err := flush(); err != nil {
				return 0, 0, err
			}
		}
	}
	if err := sc.Err(); err != nil {
		return 0, 0, err
	}
	if err := flush(); err != nil {
		return 0, 0, err
	}
	if err := w.Close(); err != nil {
		return 0, 0, err
	}
	if err := bw.Flush(); err != nil {
		return 0, 0, err
	}
	if err := f.Close(); err != nil {
		return 0, 0, err
	}
	st, err := os.Stat(out)
	if err != nil {
		return 0, 0, err
	}
	rg, err := rowGroupDecoded(out)
	if err != nil {
		return 0, 0, fmt.Errorf("bench: reading back %s: %w", out, err)
	}
	return st.Size(), rg, nil
}

// parseEvent splits a generator CSV record: no field is quoted, and the
// amount is not negative and has exactly two decimals.
func parseEvent(rec []byte) (parquetEvent, error) {
	var e parquetEvent
	fields := bytes.Split(rec, []byte(","))
	if len(fields) != 5 {
		return e, fmt.Errorf("%d fields, want 5", len(fields))
	}
	ts, err := strconv.ParseInt(string(fields[2]), 10, 64)
	if err != nil {
		return e, err
	}
	whole, cents, ok := bytes.Cut(fields[4], []byte("."))
	w, err1 := strconv.ParseUint(string(whole), 10, 62)
	c, err2 := strconv.ParseUint(string(cents), 10, 8)
	if !ok || len(cents) != 2 || err1 != nil || err2 != nil {
		return e, fmt.Errorf("amount %q", fields[4])
	}
	e.UserID, e.DeviceID, e.TimestampMs, e.EventType, e.Amount = string(fields[0]), string(fields[1]), ts, string(fields[3]), int64(w*100+c)
	return e, nil
}

// valueBytes is the size of a parquet.Value, which a copy holds for each
// value of the rows it decodes.
const valueBytes = 24

// rowGroupDecoded is about what the largest row group of Parquet file
// name takes held decoded by a copy: its uncompressed bytes, and a
// parquet.Value a value.
func rowGroupDecoded(name string) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		return 0, err
	}
	var most int64
	for _, rg := range pf.Metadata().RowGroups {
		most = max(most, rg.TotalByteSize+rg.NumRows*int64(len(rg.Columns))*valueBytes)
	}
	if most <= 0 {
		return 0, fmt.Errorf("no row group holds anything")
	}
	return most, nil
}
