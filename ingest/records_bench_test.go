package ingest

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"testing"
)

// benchRecords is how many events the key benchmarks read per iteration.
const benchRecords = 100_000

// benchSink keeps the benchmarks' keys alive.
var benchSink int

// benchEvents generates events like the ones fpdedup is for (logins, orders):
// user, device, timestamp, event, amount. quoted puts every csv field in
// quotes, the way some exporters write them.
func benchEvents(f Format, quoted bool) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	events := []string{"login", "logout", "order", "payment", "refund"}
	var b bytes.Buffer
	for i := range benchRecords {
		user := fmt.Sprintf("u%d", rng.IntN(100000))
		device := fmt.Sprintf("d%x", rng.IntN(4096))
		ts := 1764633600000 + int64(i)
		event := events[rng.IntN(len(events))]
		amount := fmt.Sprintf("%d.%02d", rng.IntN(500), rng.IntN(100))
		switch {
		case f == FormatJSONL:
			fmt.Fprintf(&b, `{"user_id":%q,"device_id":%q,"timestamp_ms":%d,"event":%q,"amount":%s}`+"\n", user, device, ts, event, amount)
		case f == FormatTSV:
			fmt.Fprintf(&b, "%s\t%s\t%d\t%s\t%s\n", user, device, ts, event, amount)
		case quoted:
			fmt.Fprintf(&b, "%q,%q,\"%d\",%q,%q\n", user, device, ts, event, amount)
		default:
			fmt.Fprintf(&b, "%s,%s,%d,%s,%s\n", user, device, ts, event, amount)
		}
	}
	return b.Bytes()
}

// benchKeys is the key of the benchmarks in each format.
func benchKeyer(b *testing.B, f Format) *Keyer {
	keys := []string{"1", "2", "3"}
	if f == FormatJSONL {
		keys = []string{"user_id", "device_id", "timestamp_ms"}
	}
	k, err := NewKeyer(KeySpec{Format: f, Keys: keys, Sep: ":"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	return k
}

// runKeyBench runs keyAll, which keys every record of data, and reports the
// time per record; where it can be read, also the process's CPU time per
// record (cpu-ns/record), which counts the garbage collector's work but not
// the other processes competing for the cores of a busy machine.
func runKeyBench(b *testing.B, data []byte, keyAll func(data []byte) int) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu0 := processCPU()
	n := 0
	for b.Loop() {
		if n = keyAll(data); n != benchRecords {
			b.Fatalf("keyed %d records, want %d", n, benchRecords)
		}
	}
	if cpu := processCPU() - cpu0; cpu0 >= 0 {
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N)/float64(benchRecords), "cpu-ns/record")
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(benchRecords), "ns/record")
	b.ReportMetric(float64(len(data))/float64(benchRecords), "B/record")
}

// handKeys keys every record of data with a Keyer, split by SplitFormat:
// what build, query and dedup do per chunk.
func handKeys(b *testing.B, f Format) func(data []byte) int {
	k := benchKeyer(b, f)
	return func(data []byte) int {
		n := 0
		SplitFormat(data, f, '\n', func(rec []byte) bool {
			key, err := k.Key(rec, false)
			if err != nil {
				b.Fatal(err)
			}
			benchSink += len(key)
			n++
			return true
		})
		return n
	}
}

// BenchmarkFingerprintShaped is dedup's and build's per-record work on a
// chunk: SplitShaped, then Keyer.Fingerprint with what it said of the
// record, in 1 MiB pieces as a ChunkReader cuts them. (The pipeline's
// Chunk.Split also skips SplitShaped's one search of a csv piece for a
// quote when the reader found none, which this one still pays.)
// "lines" keys the same
// events' whole lines, the floor the container formats are measured
// against (issue 11: csv --key 1,2,3 within 1.2x of lines).
func BenchmarkFingerprintShaped(b *testing.B) {
	for _, f := range []Format{FormatLines, FormatCSV, FormatTSV} {
		src := FormatCSV
		if f == FormatTSV {
			src = FormatTSV
		}
		data := benchEvents(src, false)
		var k *Keyer
		if f == FormatLines {
			var err error
			if k, err = NewKeyer(KeySpec{Format: FormatLines, Term: '\n'}, nil); err != nil {
				b.Fatal(err)
			}
		} else {
			k = benchKeyer(b, f)
		}
		b.Run(f.String(), func(b *testing.B) {
			var acc uint64
			runKeyBench(b, data, func(data []byte) int {
				n := 0
				for len(data) > 0 {
					piece := data[:min(len(data), 1<<20)]
					piece = piece[:bytes.LastIndexByte(piece, '\n')+1]
					data = data[len(piece):]
					SplitShaped(piece, f, '\n', func(rec []byte, simple bool) bool {
						fp, err := k.Fingerprint(rec, false, simple, XXH3)
						if err != nil {
							b.Fatal(err)
						}
						acc += fp.Lo
						n++
						return true
					})
				}
				return n
			})
			benchSink += int(acc & 1)
		})
	}
}
