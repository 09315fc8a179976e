package ingest

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
)

// goRow is a row of the files the Go library writes for the tests below:
// every type a key column has, in each encoding the library writes.
type goRow struct {
	I64      int64    `parquet:"i64"`
	I64Plain int64    `parquet:"i64plain,plain"`
	I64Dict  int64    `parquet:"i64dict,dict"`
	I64Delta int64    `parquet:"i64delta,delta"`
	I32      int32    `parquet:"i32,dict"`
	U32      uint32   `parquet:"u32,plain"`
	U64      uint64   `parquet:"u64,dict"`
	F32      float32  `parquet:"f32,plain"`
	F64      float64  `parquet:"f64,dict"`
	F64Split float64  `parquet:"f64split,split"`
	B        bool     `parquet:"b"`
	S        string   `parquet:"s,plain"`
	SDict    string   `parquet:"sdict,dict"`
	SDelta   string   `parquet:"sdelta,delta"`
	Bytes    []byte   `parquet:"bytes"`
	Fixed    [5]byte  `parquet:"fixed"`
	Dec      int64    `parquet:"dec,decimal(2:18)"`
	Dec32    int32    `parquet:"dec32,decimal(3:9)"`
	OptI     *int64   `parquet:"opti,optional,plain"`
	OptID    *int64   `parquet:"optid,optional,dict"`
	OptS     *string  `parquet:"opts,optional,dict"`
	OptF     *float32 `parquet:"optf,optional"`
	OptB     *bool    `parquet:"optb,optional"`
}

// goFile writes n rows with the Go library in page version v, codec c and
// pages of about page bytes.
func goFile(t testing.TB, n int, v int, c compress.Codec, page int) []byte {
	t.Helper()
	r := rand.New(rand.NewPCG(uint64(n), uint64(v)))
	rows := make([]goRow, n)
	for i := range rows {
		k := int64(r.IntN(n/3 + 1)) // repeats, for the dictionaries
		s := fmt.Sprintf("k-%d-%s", k, strings.Repeat("x", int(k%7)))
		rows[i] = goRow{
			I64: k*1e9 - 5e11, I64Plain: -k, I64Dict: k % 97, I64Delta: 1700000000000 + int64(i)*37 - k,
			I32: int32(k) - 1000, U32: math.MaxUint32 - uint32(k), U64: math.MaxUint64 - uint64(k%13),
			F32: float32(k) / 3, F64: float64(k%11) * 1.1, F64Split: float64(k) / 7,
			B: k%2 == 0, S: s, SDict: s[:min(len(s), 3+int(k%4))], SDelta: "prefix-" + s,
			Bytes: []byte(s), Fixed: [5]byte{byte(k), 0, 255, byte(k >> 8), 7},
			Dec: k*101 - 50000, Dec32: int32(k) * -7,
		}
		if k%5 != 0 {
			x, f, b := k, float32(k)/9, k%3 == 0
			rows[i].OptI, rows[i].OptID, rows[i].OptS, rows[i].OptF, rows[i].OptB = &x, &x, &s, &f, &b
		}
	}
	var out bytes.Buffer
	w := parquet.NewGenericWriter[goRow](&out, parquet.DataPageVersion(v), parquet.Compression(c),
		parquet.PageBufferSize(page), parquet.MaxRowsPerRowGroup(int64(n/3+1)))
	if _, err := w.Write(rows); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// TestChunkTextMatchesLibrary: the key texts chunkText decodes from the
// checked pages are the library's, row for row, NULLs included, for every
// key column of DuckDB's fixtures and of files the Go library writes in
// every page version, codec and encoding. Where chunkText leaves a chunk
// to the library (a delta or split encoding), the chunk is still read; and
// both paths must have been taken.
func TestChunkTextMatchesLibrary(t *testing.T) {
	files := map[string][]byte{}
	for _, name := range []string{"types.parquet", "events.parquet", "events-nested.parquet", "small.parquet"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "parquet", name))
		if err != nil {
			t.Fatal(err)
		}
		files[name] = b
	}
	for _, v := range []int{1, 2} {
		for _, c := range []compress.Codec{&parquet.Uncompressed, &parquet.Snappy, &parquet.Zstd, &parquet.Gzip, &parquet.Lz4Raw, &parquet.Brotli} {
			files[fmt.Sprintf("go-v%d-%s", v, c.CompressionCodec())] = goFile(t, 3000, v, c, 1500)
		}
	}
	fast, library := map[string]int{}, map[string]int{}
	for name, b := range files {
		p, err := OpenParquet(name, bytes.NewReader(b), int64(len(b)), 64<<20)
		if err != nil {
			t.Fatal(err)
		}
		for c, col := range p.Columns() {
			if _, err := p.ResolveKey([]string{col.Path}); err != nil {
				continue
			}
			for g := range p.RowGroups() {
				n := p.file.RowGroups()[g].NumRows()
				dec := &chunkText{name: name, col: &p.columns[c], rows: n, limit: p.limit}
				dec.out.reset(n, 0)
				if err := p.checkPages(g, c, &pageScratch{}, dec); err != nil {
					t.Fatalf("%s column %s: %v", name, col.Path, err)
				}
				var want keyText
				if err := p.readColumn(p.file.RowGroups()[g].ColumnChunks()[c], n, &p.columns[c], &want); err != nil {
					t.Fatalf("%s column %s: the library: %v", name, col.Path, err)
				}
				if dec.fallback {
					library[col.Type]++
					continue
				}
				fast[col.Type]++
				got, err := dec.done()
				if err != nil {
					t.Fatalf("%s column %s: %v", name, col.Path, err)
				}
				for r := range n {
					gt, gn := got.text(r)
					wt, wn := want.text(r)
					if gn != wn || !bytes.Equal(gt, wt) {
						t.Fatalf("%s column %s row group %d row %d: %q (null %v), the library %q (null %v)", name, col.Path, g, r, gt, gn, wt, wn)
					}
				}
			}
		}
		p.Close()
	}
	t.Logf("decoded here: %v", fast)
	t.Logf("by the library: %v", library)
	if len(fast) < 8 || len(library) == 0 {
		t.Fatalf("the paths taken: %d types here, %d by the library", len(fast), len(library))
	}
}

// TestParquetPageCRC: a page whose bytes do not match the CRC its writer
// wrote (the Go library writes them) is a damaged file, named.
func TestParquetPageCRC(t *testing.T) {
	b := goFile(t, 3000, 1, &parquet.Uncompressed, 1500)
	p, err := OpenParquet("crc.parquet", bytes.NewReader(b), int64(len(b)), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	cols, err := p.ResolveKey([]string{"s"})
	if err != nil {
		t.Fatal(err)
	}
	m := p.file.Metadata().RowGroups[0].Columns[cols[0]].MetaData
	p.Close()
	// The last byte of the chunk's last page, a value's.
	at := m.DataPageOffset + m.TotalCompressedSize - 1
	if m.DictionaryPageOffset > 0 && m.DictionaryPageOffset < m.DataPageOffset {
		t.Fatalf("column s has a dictionary")
	}
	if readParquetKeys(b, 64<<20) != nil {
		t.Fatal("the file as written does not read")
	}
	b[at] ^= 0x20
	err = readParquetKeys(b, 64<<20)
	if !errors.Is(err, ErrParquetDamaged) || !strings.Contains(err.Error(), "fails its CRC") || !strings.Contains(err.Error(), "column s") {
		t.Fatalf("a page with a byte flipped: %v", err)
	}
}
