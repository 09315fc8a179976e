package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/sys/unix"
)

func newPagesCommand(e *env) *cobra.Command {
	var n int
	var seed uint64
	cmd := &cobra.Command{
		Use:   "pages FILE",
		Short: "Time the first touch of a mapped page in a new process against a pread of it",
		Long: `Pages reads --pages random 4 KiB pages of FILE three ways, in this order:
pread, untimed (so that every page is in the page cache); through a new
read-only shared mapping of the file, a byte of each page (the first touch:
the kernel maps the page, or the huge page holding it, into the process);
pread again, into one buffer. It prints, for the mapping, the faults taken
(minor faults of the process meanwhile) and the time per fault and per page,
and for pread the time per page.

It is the measurement behind the cost of a warm lookup in a new process on a
large index (docs/SCALE.md): an index lookup reads its pages through a
mapping, and a batch that touches pages in many huge pages of a large file
pays a fault for each, a cost the machine sets (a virtual machine's is many
times a bare one's). Run it on the index itself, in the page cache.`,
		Example: `  fpdedup-bench pages --pages 30000 history.fpx`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if n <= 0 {
				return usageErrorf("--pages must be positive")
			}
			r, err := touchPages(args[0], n, seed)
			if err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "pages\t%d\nhuge_pages\t%d\nmap_faults\t%d\nmap_us_per_fault\t%.2f\nmap_us_per_page\t%.2f\npread_us_per_page\t%.2f\n",
				r.pages, r.hugePages, r.faults, r.mapTime.Seconds()*1e6/float64(max(r.faults, 1)), r.mapTime.Seconds()*1e6/float64(r.pages), r.preadTime.Seconds()*1e6/float64(r.pages))
			return nil
		},
	}
	cmd.Flags().IntVar(&n, "pages", 30000, "how many random pages to read (`N`)")
	cmd.Flags().Uint64Var(&seed, "seed", 1, "seed of the pages' choice")
	return cmd
}

type pageTimes struct {
	pages, hugePages   int
	faults             int64
	mapTime, preadTime time.Duration
}

// touchPages reads n random pages of path by pread, then through a new
// mapping and by pread again, timing the last two.
func touchPages(path string, n int, seed uint64) (pageTimes, error) {
	var r pageTimes
	f, err := os.Open(path)
	if err != nil {
		return r, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return r, err
	}
	const page = 4096
	if st.Size() < page {
		return r, fmt.Errorf("%s: smaller than a page", path)
	}
	rng := rand.New(rand.NewPCG(seed, seed))
	offs := make([]int64, n)
	for i := range offs {
		offs[i] = rng.Int64N(st.Size()/page) * page
	}
	slices.Sort(offs)
	offs = slices.Compact(offs)
	r.pages = len(offs)
	last := int64(-1)
	for _, o := range offs {
		if o>>21 != last {
			r.hugePages++
			last = o >> 21
		}
	}
	buf := make([]byte, page)
	for _, o := range offs {
		if _, err := f.ReadAt(buf, o); err != nil {
			return r, fmt.Errorf("%s: %w", path, err)
		}
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return r, fmt.Errorf("cannot map %s: %w", path, err)
	}
	defer unix.Munmap(data)
	_ = unix.Madvise(data, unix.MADV_RANDOM) // as an index's lookups map it
	var before, after unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &before)
	start := time.Now()
	var sum byte
	for _, o := range offs {
		sum += data[o]
	}
	r.mapTime = time.Since(start)
	_ = unix.Getrusage(unix.RUSAGE_SELF, &after)
	r.faults = after.Minflt - before.Minflt + after.Majflt - before.Majflt
	start = time.Now()
	for _, o := range offs {
		if _, err := f.ReadAt(buf, o); err != nil {
			return r, fmt.Errorf("%s: %w", path, err)
		}
		sum += buf[0]
	}
	r.preadTime = time.Since(start)
	runtime.KeepAlive(sum) // the touches must not be optimized away
	return r, nil
}
