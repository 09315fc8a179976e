package pipeline

import (
	"bufio"
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/fpdedup/fpdedup/bench/gen"
	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/rbloom"
)

// benchReplayEvents is the benchmark's day: the reference mix of fpdedup gen
// (38% repeats, half of them far back), csv lines of ~51 bytes.
const benchReplayEvents = 4_000_000

// BenchmarkReplay replays the reference mix with L2 at 1 GiB (16 shards of
// 2^29 bits, k=3) and an L1 of 2^20 bits with a 1 s TTL, keyed by
// user:device:timestamp_ms, in arrival order (far repeats are late): the
// whole job, reading, parsing, hashing, the exact truth and both tiers.
// events/cpu-s is events per second of process CPU time (all threads):
// the per-core figure, with and without the blooms' first touch
// (setup-s/op, paid once a run, and far costlier on guest memory never
// used before).
//
//	go test -run '^$' -bench 'Replay$' -benchtime 3x ./pipeline
func BenchmarkReplay(b *testing.B) {
	path := filepath.Join(b.TempDir(), "day.csv")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err := gen.Generate(bw, gen.Options{Records: benchReplayEvents, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	if err := errors.Join(bw.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
	opts := ReplayOptions{
		Inputs: []string{path}, Records: csvRecords(b, false, "1", "2", "3"), TimeField: "3", Arrival: true,
		L1: &ReplayL1{Bits: 1 << 20, TTL: time.Second}, L2: &ReplayL2{Shards: 16, Bits: []uint64{1 << 29}, K: 3},
		Mem: 4 << 30, TmpDir: b.TempDir(),
	}
	var cpu, setup, setupCPU time.Duration
	var events int64
	b.ResetTimer()
	for range b.N {
		c := processCPU()
		st, err := Replay(context.Background(), opts)
		if err != nil {
			b.Fatal(err)
		}
		cpu += processCPU() - c
		events += st.Events
		setup += time.Duration(st.SetupSeconds * 1e9)
		setupCPU += time.Duration(st.SetupCPUSeconds * 1e9)
	}
	b.StopTimer()
	b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
	b.ReportMetric(float64(events)/cpu.Seconds(), "events/cpu-s")
	b.ReportMetric(float64(events)/(b.Elapsed()-setup).Seconds(), "events/s-after-setup")
	b.ReportMetric(float64(events)/(cpu-setupCPU).Seconds(), "events/cpu-s-after-setup")
	b.ReportMetric(setup.Seconds()/float64(b.N), "setup-s/op")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkReplaySim is the simulation's goroutine alone, one event an
// op, on fingerprints made beforehand (38% repeats): the exact seen-set,
// an L1 of 2^20 bits and L2 at 1 GiB. It bounds Replay's throughput
// whatever the threads parsing for it.
func BenchmarkReplaySim(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	fps := make([]fpstore.Fingerprint, 0, b.N)
	for i := 0; i < b.N; i++ {
		if i > 0 && r.IntN(100) < 38 {
			fps = append(fps, fps[r.IntN(i)])
			continue
		}
		fps = append(fps, fpstore.Fingerprint{Hi: r.Uint64(), Lo: r.Uint64()})
	}
	opts := &ReplayOptions{
		L1: &ReplayL1{Bits: 1 << 20, TTL: time.Second}, L2: &ReplayL2{Shards: 16, Bits: []uint64{1 << 29}, K: 3},
		Inputs: []string{"-"}, Mem: 4 << 30, TmpDir: b.TempDir(),
	}
	rp, err := newReplayer(opts)
	defer rp.free()
	if err != nil {
		b.Fatal(err)
	}
	// Sized for the input, as a file's estimate sizes it (stdin's grows).
	rp.truth.table.free()
	if rp.truth.table, err = newSeenShard(b.N, 1<<40); err != nil {
		b.Fatal(err)
	}
	evs := make([]replayEvent, 4096) // a chunk's worth, as consume has
	runtime.GC()
	c := processCPU()
	b.ResetTimer()
	for at := 0; at < len(fps); at += len(evs) {
		chunk := evs[:min(len(evs), len(fps)-at)]
		for i := range chunk {
			n := at + i
			chunk[i] = replayEvent{fp: fps[n], t: int64(n) * int64(4*time.Millisecond), line: int64(n + 1), record: int64(n + 1)}
		}
		if err := rp.replay("bench", 0, chunk); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/(processCPU()-c).Seconds(), "events/cpu-s")
}

// BenchmarkReplayL2 is the whole replay job of BenchmarkReplay (the same
// day, L1 in front) with each L2 model beside the other: ns/event is the
// job's wall time an event (the set-up, paid once a run, left out),
// events/cpu-s per core. bitmap is BenchmarkReplay's 1 GiB (16 shards of
// 2^29 bits, k=3); redisbloom-1GiB is 16 RedisBloom filters of one
// sub-filter of about 64 MiB each (capacity 48M at error 0.01: the first
// sub-filter at 0.005, 11 bits an item); redisbloom-grown is 16 filters
// of capacity 20k that grow to 3 sub-filters over the day's 2.48M
// distinct keys, as an online tier reserved too small does.
//
//	go test -run '^$' -bench 'ReplayL2$' -benchtime 3x ./pipeline
func BenchmarkReplayL2(b *testing.B) {
	path := filepath.Join(b.TempDir(), "day.csv")
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	if _, err := gen.Generate(bw, gen.Options{Records: benchReplayEvents, Seed: 1}); err != nil {
		b.Fatal(err)
	}
	if err := errors.Join(bw.Flush(), f.Close()); err != nil {
		b.Fatal(err)
	}
	router, err := rbloom.NewRouter(rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: 16})
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range []struct {
		name string
		l2   *ReplayL2
		rb   *ReplayRedisBloom
	}{
		{"bitmap", &ReplayL2{Shards: 16, Bits: []uint64{1 << 29}, K: 3}, nil},
		{"redisbloom-1GiB", nil, &ReplayRedisBloom{Capacity: []uint64{48_000_000}, Error: 0.01, Router: router, Item: rbloom.ItemKey}},
		{"redisbloom-grown", nil, &ReplayRedisBloom{Capacity: []uint64{20_000}, Error: 0.01, Router: router, Item: rbloom.ItemKey}},
	} {
		b.Run(m.name, func(b *testing.B) {
			opts := ReplayOptions{
				Inputs: []string{path}, Records: csvRecords(b, false, "1", "2", "3"), TimeField: "3", Arrival: true,
				L1: &ReplayL1{Bits: 1 << 20, TTL: time.Second}, L2: m.l2, RedisBloom: m.rb,
				Mem: 6 << 30, TmpDir: b.TempDir(),
			}
			var cpu, setup, setupCPU time.Duration
			var events int64
			links := 0
			b.ResetTimer()
			for range b.N {
				c := processCPU()
				st, err := Replay(context.Background(), opts)
				if err != nil {
					b.Fatal(err)
				}
				cpu += processCPU() - c
				events += st.Events
				setup += time.Duration(st.SetupSeconds * 1e9)
				setupCPU += time.Duration(st.SetupCPUSeconds * 1e9)
				for _, sh := range st.Systems[0].L2.Shards {
					links = max(links, sh.SubFilters)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((b.Elapsed()-setup).Nanoseconds())/float64(events), "ns/event")
			b.ReportMetric(float64(events)/(cpu-setupCPU).Seconds(), "events/cpu-s")
			if m.rb != nil {
				b.ReportMetric(float64(links), "sub-filters")
			}
			b.ReportMetric(0, "ns/op")
		})
	}
}

// BenchmarkReplaySimL2 is BenchmarkReplaySim's simulation alone (the exact
// seen-set, L1 of 2^20 bits, one event an op) with each L2 model of
// BenchmarkReplayL2, on hashes and shards made beforehand: what bounds the
// job whatever the threads parsing for it.
func BenchmarkReplaySimL2(b *testing.B) {
	router, err := rbloom.NewRouter(rbloom.RouterSpec{Route: rbloom.RouteModMD5, Shards: 16})
	if err != nil {
		b.Fatal(err)
	}
	for _, m := range []struct {
		name string
		l2   *ReplayL2
		rb   *ReplayRedisBloom
	}{
		{"bitmap", &ReplayL2{Shards: 16, Bits: []uint64{1 << 29}, K: 3}, nil},
		{"redisbloom-1GiB", nil, &ReplayRedisBloom{Capacity: []uint64{48_000_000}, Error: 0.01, Router: router, Item: rbloom.ItemKey}},
		{"redisbloom-grown", nil, &ReplayRedisBloom{Capacity: []uint64{20_000}, Error: 0.01, Router: router, Item: rbloom.ItemKey}},
	} {
		b.Run(m.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			evs := make([]replayEvent, 0, b.N)
			for i := 0; i < b.N; i++ {
				if i > 0 && r.IntN(100) < 38 {
					evs = append(evs, evs[r.IntN(i)])
					continue
				}
				evs = append(evs, replayEvent{fp: fpstore.Fingerprint{Hi: r.Uint64(), Lo: r.Uint64()}, rb: rbloom.Hash{A: r.Uint64(), B: r.Uint64()}, rbShard: r.IntN(16)})
			}
			for i := range evs {
				evs[i].t, evs[i].line, evs[i].record = int64(i)*int64(4*time.Millisecond), int64(i+1), int64(i+1)
			}
			opts := &ReplayOptions{
				L1: &ReplayL1{Bits: 1 << 20, TTL: time.Second}, L2: m.l2, RedisBloom: m.rb,
				Inputs: []string{"-"}, Mem: 6 << 30, TmpDir: b.TempDir(),
			}
			rp, err := newReplayer(opts)
			defer rp.free()
			if err != nil {
				b.Fatal(err)
			}
			rp.truth.table.free()
			if rp.truth.table, err = newSeenShard(b.N, 1<<40); err != nil {
				b.Fatal(err)
			}
			runtime.GC()
			c := processCPU()
			b.ResetTimer()
			for at := 0; at < len(evs); at += 4096 {
				if err := rp.replay("bench", 0, evs[at:min(at+4096, len(evs))]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/(processCPU()-c).Seconds(), "events/cpu-s")
		})
	}
}
