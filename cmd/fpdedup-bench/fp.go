package main

import (
	"bufio"
	"io"
	bits64 "math/bits"
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/bench/gen"
	"github.com/fpdedup/fpdedup/internal/units"
)

func newFpCommand(e *env) *cobra.Command {
	var from, count, out, partition string
	var seed uint64
	cmd := &cobra.Command{
		Use:   "fp [--seed S] [--from I] [--count N] [--partition I/N] [-o FILE]",
		Short: "Write random 128-bit fingerprints as hex, the input of build --format fp",
		Long: `Fp writes fingerprints I, I+1, …, I+N-1 of a seed as 32 lowercase hex digits
a line: the input of fpdedup build --format fp, the fast way to make a big
index without hashing records. A fingerprint is a pure function of (seed,
index), so two ranges of one seed overlap exactly where their indexes do:
--from 0 --count 10 and --from 8 --count 10 share 2.

--partition I/N writes only those of prefix partition I of N (N a power of
two), the share of that range that fpdedup build --partition I/N keeps:
one machine's part of a partitioned set, without the hex of the rest.`,
		Example: `  fpdedup-bench fp --count 50M | fpdedup build --format fp --hash xxh3 -o a.fpx
  fpdedup-bench fp --count 3G --partition 1/4 | fpdedup build --format fp --hash xxh3 --partition 1/4 -o p1.fpx`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			first, err := units.ParseCount(from)
			if err != nil {
				return usageErrorf("--from: %v", err)
			}
			n, err := units.ParseCount(count)
			if err != nil {
				return usageErrorf("--count: %v", err)
			}
			if first > (1<<62)-n {
				return usageErrorf("--from + --count overflows")
			}
			var bits uint8
			var index uint64
			if partition != "" {
				is, ns, ok := strings.Cut(partition, "/")
				i, err1 := strconv.ParseUint(is, 10, 64)
				parts, err2 := strconv.ParseUint(ns, 10, 64)
				if !ok || err1 != nil || err2 != nil || parts < 2 || parts&(parts-1) != 0 || parts > 1<<32 || i >= parts {
					return usageErrorf("--partition %q: want I/N with N a power of two and 0 <= I < N", partition)
				}
				bits, index = uint8(bits64.TrailingZeros64(parts)), i
			}
			var w io.Writer = e.stdout
			var f *os.File
			if out != "" && out != "-" {
				if f, err = os.Create(out); err != nil {
					return err
				}
				w = f
			}
			bw := bufio.NewWriterSize(w, 1<<20)
			err = gen.PartitionFingerprints(bw, seed, uint64(first), uint64(n), bits, index)
			if err == nil {
				err = bw.Flush()
			}
			if f != nil {
				if cerr := f.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					os.Remove(out) // no half file taken for data
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&seed, "seed", 1, "seed: same seed and index, same fingerprint")
	f.StringVar(&from, "from", "0", "index of the first fingerprint (k, M, G suffixes)")
	f.StringVar(&count, "count", "1M", "fingerprints to write (k, M, G suffixes)")
	f.StringVarP(&out, "output", "o", "", "write to `FILE` (default stdout)")
	f.StringVar(&partition, "partition", "", "write only prefix partition `I/N` (N a power of two)")
	return cmd
}
