package sysinfo

import (
	"bytes"
	"os"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// RSSSampler follows the process's resident memory in two parts: anonymous (heap, tables, buffers: what a memory budget bounds) and
// file-backed (mapped indexes: page cache the kernel can reclaim). The
// kernel keeps only the total's peak (VmHWM), so the parts are sampled.
type RSSSampler struct {
	anon, file atomic.Int64 // peaks, bytes
	heap       atomic.Int64 // the Go runtime's memory's peak (heapBytes)
	done       chan struct{}
	ended      sync.WaitGroup
	once       sync.Once
}

// StartRSSSampler starts sampling every 20 ms until Stop or Peaks.
func StartRSSSampler() *RSSSampler {
	s := &RSSSampler{done: make(chan struct{})}
	s.sample()
	s.ended.Go(func() {
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-s.done:
				return
			case <-t.C:
				s.sample()
			}
		}
	})
	return s
}

// Stop ends the sampling and waits for it; it may be called more than once,
// and on a nil sampler (the command never started one).
func (s *RSSSampler) Stop() {
	if s == nil {
		return
	}
	s.once.Do(func() { close(s.done) })
	s.ended.Wait()
}

// heapMetrics are what the Go heap's soft limit bounds: the runtime's
// memory but what it has returned to the system.
var heapMetrics = []metrics.Sample{{Name: "/memory/classes/total:bytes"}, {Name: "/memory/classes/heap/released:bytes"}}

func (s *RSSSampler) sample() {
	ms := slices.Clone(heapMetrics)
	metrics.Read(ms)
	if ms[0].Value.Kind() == metrics.KindUint64 && ms[1].Value.Kind() == metrics.KindUint64 {
		raise(&s.heap, int64(ms[0].Value.Uint64()-ms[1].Value.Uint64()))
	}
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		var peak *atomic.Int64
		switch {
		case bytes.HasPrefix(line, []byte("RssAnon:")):
			peak = &s.anon
		case bytes.HasPrefix(line, []byte("RssFile:")):
			peak = &s.file
		default:
			continue
		}
		f := bytes.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(string(f[1]), 10, 64)
		if err != nil {
			continue
		}
		raise(peak, kb<<10)
	}
}

// raise makes peak at least v.
func raise(peak *atomic.Int64, v int64) {
	for {
		old := peak.Load()
		if v <= old || peak.CompareAndSwap(old, v) {
			return
		}
	}
}

// HeapPeak is the Go runtime's memory at its most (what the heap's soft
// limit bounds), sampled with the RSS; call it after Peaks.
func (s *RSSSampler) HeapPeak() int64 { return s.heap.Load() }

// Peaks stops sampling and returns the peaks, in bytes.
func (s *RSSSampler) Peaks() (anon, file int64) {
	s.Stop()
	s.sample()
	return s.anon.Load(), s.file.Load()
}
