package fpstore

import (
	"bytes"
	"fmt"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/fpdedup/fpdedup/internal/memplan"
	"github.com/fpdedup/fpdedup/internal/pagecache"
)

// benchReadBuffers is what a query process at --mem 1GiB reads cold
// lookups with: room to hold a 2·10^8-key index's directories.
var benchReadBuffers = memplan.Query(1 << 30).ReadBuffers

// BenchmarkColdPaths compares the two ways a cold lookup can read an index
// that is open (its segments open; pread's directories held after the
// first iteration, as in a running process): through the mapping (a
// single lookup faults its pages in; a batch asks for each stage's pages
// at once, coldread.go) and with pread (pread.go), for batches of 1, 10^3,
// 10^4 and 10^5 keys, half present; and single lookups in a process that
// looked up fewer keys, holding few directory pages (pread-fewdirs). Before each batch the file is dropped
// from the page cache (MADV_DONTNEED on the mapping, POSIX_FADV_DONTNEED
// on the file); single lookups are of keys no lookup read the pages of. It reports the time a key and the bytes read from the
// device a key (/proc/self/io read_bytes) and in pages.
//
//	go test -run XXX -bench ColdPaths -benchtime 20x ./fpstore
func BenchmarkColdPaths(b *testing.B) {
	path, sample := benchIndex()
	for _, n := range []int{1, 1000, 10_000, 100_000} {
		for _, p := range []struct {
			name string
			path readPath
			ask  bool
			few  bool // singles: the process looked up as the scale job's did
		}{{"mapping", pathAdvised, false, false}, {"pread", pathPread, true, false}, {"pread-noask", pathPread, false, false}, {"pread-fewdirs", pathPread, true, true}} {
			if p.few && n > 1 {
				continue
			}
			b.Run(fmt.Sprintf("keys=%d/%s", n, p.name), func(b *testing.B) {
				defer func(was bool) { preadAsk = was }(preadAsk)
				preadAsk = p.ask
				x, err := Open(path, WithReadBuffers(benchReadBuffers))
				if err != nil {
					b.Fatal(err)
				}
				defer x.Close()
				if n == 1 && p.path == pathAdvised {
					x.forcePath.Store(uint32(pathMapped))
				} else {
					x.forcePath.Store(uint32(p.path))
				}
				seed := uint64(31)
				var took time.Duration
				var read, devRead, before, devBefore int64
				keys, found := 0, make([]bool, n)
				var singles, device []time.Duration
				var cold *pagecache.ColdPages
				if n == 1 {
					if cold, err = pagecache.OpenColdPages(path, 7); err != nil {
						b.Fatal(err)
					}
					defer cold.Close()
				}
				for i := 0; i < b.N+1; i++ {
					ks := halfPresent(sample, n, seed)
					if i == 0 {
						// A running process: every segment open, the
						// directories read; or, pread-fewdirs, those of
						// the keys fewer than make it read the file
						// whole (ReadAheadAfter), as the scale job's.
						ks = halfPresent(sample, 50_000, seed)
						if p.few {
							ks = ks[:min(len(ks), int(x.ReadAheadAfter()/2))]
						}
						found = make([]bool, len(ks))
					}
					seed++
					// Single lookups follow each other as fio's depth-1
					// reads do, each of a key whose pages no lookup read
					// before: the file is dropped once, and one lookup
					// not timed goes first. The first read after a drop
					// of the whole file (any file's: measured) waits
					// 100-200 µs more for this VM's disk than reads that
					// follow each other do.
					if n > 1 || i <= 1 {
						_ = unix.Madvise(x.data, unix.MADV_DONTNEED)
						dropFromPageCache(b, path)
					}
					if n == 1 && i == 1 {
						if _, err := x.Contains(Fingerprint{^seed, seed}); err != nil {
							b.Fatal(err)
						}
					}
					// Single lookups take turns with a read of a page no
					// lookup asked for (pagecache.ColdPages), the device's
					// own read in the same rhythm: on this VM's disk a read
					// that follows other work takes up to twice as long as
					// fio's back-to-back depth-1 reads. The counters are
					// read around the whole run, not between lookups.
					if n > 1 || i <= 1 {
						before, devBefore = readBytes(b), deviceReads(b, path)
					}
					t := time.Now()
					if i == 1 {
						found = make([]bool, n)
					}
					if n == 1 && i > 0 {
						if _, err := x.Contains(ks[0]); err != nil {
							b.Fatal(err)
						}
					} else if err := x.ContainsBatch(ks, found); err != nil {
						b.Fatal(err)
					}
					if i == 0 {
						continue // the segments opened, the directories read
					}
					took += time.Since(t)
					if n == 1 {
						singles = append(singles, time.Since(t))
						d, err := cold.Read()
						if err != nil {
							b.Fatal(err)
						}
						device = append(device, d)
					}
					if n > 1 || i == b.N {
						read += readBytes(b) - before
						devRead += deviceReads(b, path) - devBefore
					}
					keys += n
				}
				b.ReportMetric(float64(took.Nanoseconds())/float64(keys), "ns/key")
				if len(singles) > 0 {
					// The mean moves with one slow read of the device.
					slices.Sort(singles)
					slices.Sort(device)
					p50, dev50 := singles[len(singles)/2], device[len(device)/2]
					b.ReportMetric(float64(p50.Nanoseconds()), "p50-ns/key")
					b.ReportMetric(float64(dev50.Nanoseconds()), "device-p50-ns")
					b.ReportMetric(float64(p50)/float64(dev50), "x-device")
					// The device's reads were a page each, from the device.
					read -= int64(len(device)) * PageSize
					devRead -= int64(len(device))
				}
				b.ReportMetric(float64(read)/float64(keys), "read-B/key")
				b.ReportMetric(float64(read)/PageSize/float64(keys), "pages/key")
				b.ReportMetric(float64(devRead)/float64(keys), "reads/key")
			})
		}
	}
}

// readBytes is what this process has had read from storage so far
// (pagecache.ProcessReadBytes).
func readBytes(b *testing.B) int64 {
	n, err := pagecache.ProcessReadBytes()
	if err != nil {
		b.Skipf("no read bytes of this process: %v", err)
	}
	return n
}

// deviceReads is how many reads the device under path has completed
// (/sys/dev/block/MAJ:MIN/stat: any process's, so the machine should be
// idle), or 0 where it does not say.
func deviceReads(b *testing.B, path string) int64 {
	var st unix.Stat_t
	if unix.Stat(path, &st) != nil {
		return 0
	}
	stat, err := os.ReadFile(fmt.Sprintf("/sys/dev/block/%d:%d/stat", unix.Major(st.Dev), unix.Minor(st.Dev)))
	if err != nil {
		return 0
	}
	f := bytes.Fields(stat)
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(string(f[0]), 10, 64)
	return n
}

// BenchmarkWarmPaths: lookups in an index in memory, opened as query opens
// it (with read buffers, so that single lookups and small batches probe
// whether to read with pread): single Contains, batches of 10 and of 20k
// keys (half present), every page touched before. A/B against a build
// without read buffers: warm lookups must not get slower.
//
//	go test -run XXX -bench WarmPaths -count 5 ./fpstore
func BenchmarkWarmPaths(b *testing.B) {
	path, sample := benchIndex()
	x, err := Open(path, WithReadBuffers(testReadBuffers))
	if err != nil {
		b.Fatal(err)
	}
	defer x.Close()
	if err := x.Scan(func([]Fingerprint) error { return nil }); err != nil {
		b.Fatal(err)
	}
	keys := halfPresent(sample, 400_000, 29)
	found := make([]bool, len(keys))
	if err := x.ContainsBatch(keys, found); err != nil { // filters, directories
		b.Fatal(err)
	}
	for _, n := range []int{1, 10, 20_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			at := 0
			var before, after unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &before)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if at+n > len(keys) {
					at = 0
				}
				if n == 1 {
					if _, err := x.Contains(keys[at]); err != nil {
						b.Fatal(err)
					}
				} else if err := x.ContainsBatch(keys[at:at+n], found[at:at+n]); err != nil {
					b.Fatal(err)
				}
				at += n
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/key")
			// CPU time, which the load of a shared machine changes less
			// than the wall clock.
			unix.Getrusage(unix.RUSAGE_SELF, &after)
			cpu := after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano()
			b.ReportMetric(float64(cpu)/float64(b.N*n), "cpu-ns/key")
		})
	}
}
