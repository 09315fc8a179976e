package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/bits"
	"os"
	"unsafe"

	"github.com/spf13/cobra"
	"github.com/zeebo/xxh3"

	"github.com/fpdedup/fpdedup/internal/hugemem"
	"github.com/fpdedup/fpdedup/internal/prefetch"
	"github.com/fpdedup/fpdedup/internal/units"
)

// boundSlot is one slot of the bound's table: a key's XXH3-128, all zero
// when empty (a key hashing to zero is not worth a flag here: 2^-128).
type boundSlot struct{ hi, lo uint64 }

// newBoundCommand is the floor of dedup-lines: the least an order-keeping
// exact dedup of lines does on this machine, with nothing of fpdedup's
// (no parser stages, no shards, no pre-filter, no growth, no checks), so
// that dedup's time can be read as a multiple of it.
func newBoundCommand(e *env) *cobra.Command {
	var distinct string
	cmd := &cobra.Command{
		Use:   "bound --distinct N FILE",
		Short: "The split+hash+table bound of dedup: first occurrences of FILE's lines, minimal",
		Long: `Bound writes the first occurrence of each distinct line of FILE, in input
order, as fpdedup dedup does, doing only what that needs: FILE read in 4 MiB
blocks, lines split with bytes.IndexByte, each hashed with XXH3-128, looked
up in an open-addressing table of 16-byte slots (linear probing, four slots
a cache line, huge pages) sized up front for --distinct keys at 70% load, and
written to stdout through a 1 MiB buffer. Two goroutines, as a two-core
pipeline: one reads, splits and hashes, one probes the table (the lines of
the next 16 keys prefetched while 16 are probed, so their cache misses
overlap) and writes. No
growth, no pre-filter, no checks, no error handling beyond I/O: the floor
that dedup-lines measures fpdedup dedup against, as cat is the floor of
reading.`,
		Example: `  fpdedup-bench bound --distinct 6.2M events.txt > /dev/null`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := units.ParseCount(distinct)
			if err != nil || n <= 0 {
				return usageErrorf("--distinct: a count of distinct lines is needed (k, M, G suffixes): %q", distinct)
			}
			emitted, err := bound(args[0], n, e)
			if err == nil {
				e.summary("bound: %d first occurrences", emitted)
			}
			return err
		},
	}
	cmd.Flags().StringVar(&distinct, "distinct", "", "distinct lines to size the table for (k, M, G suffixes)")
	return cmd
}

// boundBlock is a block of the input on its way from the reader to the
// prober: whole lines, their offsets and their fingerprints.
type boundBlock struct {
	data  []byte
	lines [][2]int32
	fps   []boundSlot
	err   error
}

func bound(name string, distinct int64, e *env) (int64, error) {
	f, err := os.Open(name)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	buckets := uint64(float64(distinct)/0.7/4) + 1
	mem, err := hugemem.Alloc(int(buckets) * 4 * 16)
	if err != nil {
		return 0, err
	}
	defer hugemem.Free(mem)
	slots := hugemem.Slice[boundSlot](mem)

	const blockSize = 4 << 20
	free, full := make(chan *boundBlock, 4), make(chan *boundBlock, 4)
	for range cap(free) {
		free <- &boundBlock{data: make([]byte, 0, blockSize)}
	}
	stop := make(chan struct{})
	defer close(stop) // an early return (an error) ends the reader too
	go splitAndHash(f, free, full, stop)

	out := bufio.NewWriterSize(e.stdout, 1<<20)
	var emitted int64
	const group = 16
	var homes [2][group]uint64
	var addrs [group]uintptr
	// locate computes the homes of fps into h and prefetches their lines.
	locate := func(fps []boundSlot, h *[group]uint64) {
		for i, fp := range fps {
			b, _ := bits.Mul64(fp.lo, buckets)
			h[i] = b * 4
			addrs[i] = uintptr(unsafe.Pointer(&slots[h[i]]))
		}
		prefetch.Addrs(addrs[:len(fps)])
	}
	for b := range full {
		if b.err != nil {
			return emitted, fmt.Errorf("%s: %w", name, b.err)
		}
		// A probe is a cache miss (160-200 ns here) that depends on
		// nothing but its own key: the next group's lines are prefetched
		// while this group is probed, so the misses overlap.
		cur := 0
		locate(b.fps[:min(group, len(b.fps))], &homes[cur])
		for g := 0; g < len(b.fps); g, cur = g+group, cur^1 {
			fps := b.fps[g:min(g+group, len(b.fps))]
			if next := g + group; next < len(b.fps) {
				locate(b.fps[next:min(next+group, len(b.fps))], &homes[cur^1])
			}
			for i, fp := range fps {
				for j := homes[cur][i]; ; {
					if slots[j] == fp {
						break
					}
					if slots[j] == (boundSlot{}) {
						if emitted++; emitted > int64(len(slots))*9/10 {
							return emitted, fmt.Errorf("%s has more than %d distinct lines: raise --distinct", name, emitted-1)
						}
						slots[j] = fp
						l := b.lines[g+i]
						out.Write(b.data[l[0] : l[1]+1])
						break
					}
					if j++; j == uint64(len(slots)) {
						j = 0
					}
				}
			}
		}
		free <- b
	}
	if err := out.Flush(); err != nil {
		return emitted, fmt.Errorf("stdout: %w", err)
	}
	return emitted, nil
}

// splitAndHash reads f into free blocks, each ending at a line's end (a
// last unterminated line gets its newline), and sends them on full with
// their lines' offsets (end excluding the newline) and XXH3-128s.
func splitAndHash(f io.Reader, free <-chan *boundBlock, full chan<- *boundBlock, stop <-chan struct{}) {
	defer close(full)
	send := func(b *boundBlock) bool {
		select {
		case full <- b:
			return true
		case <-stop:
			return false
		}
	}
	var carry []byte
	for eof := false; !eof; {
		var b *boundBlock
		select {
		case b = <-free:
		case <-stop:
			return
		}
		b.data = append(b.data[:0], carry...)
		n, err := io.ReadFull(f, b.data[len(b.data):cap(b.data)])
		b.data = b.data[:len(b.data)+n]
		switch {
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			eof = true
			if len(b.data) > 0 && b.data[len(b.data)-1] != '\n' {
				b.data = append(b.data, '\n')
			}
		case err != nil:
			b.err = err
			send(b)
			return
		}
		end := bytes.LastIndexByte(b.data, '\n') + 1
		if end == 0 && len(b.data) == cap(b.data) {
			b.err = fmt.Errorf("a line longer than %d bytes", cap(b.data))
			send(b)
			return
		}
		carry = append(carry[:0], b.data[end:]...)
		b.lines, b.fps = b.lines[:0], b.fps[:0]
		for at := 0; at < end; {
			i := at + bytes.IndexByte(b.data[at:end], '\n')
			h := xxh3.Hash128(b.data[at:i])
			b.lines = append(b.lines, [2]int32{int32(at), int32(i)})
			b.fps = append(b.fps, boundSlot{h.Hi, h.Lo})
			at = i + 1
		}
		b.data = b.data[:end]
		if !send(b) {
			return
		}
	}
}
