package main

import (
	"context"
	"time"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/memplan"
)

func newMergeCommand(inv *invocation) *cobra.Command {
	var output string
	var subtract, intersect bool
	var partition string
	cmd := &cobra.Command{
		Use:   "merge -o OUT.fpx IDX...",
		Short: "Union, subtract or intersect indexes into a new one",
		Long: `Merge writes the union of the IDX indexes (default), the first minus all the
others (--subtract), or what all hold (--intersect) as a new index, published
atomically. It reads each input once, in order, checking every page's
checksum (a damaged input is an error, never a wrong result), and merges on one
core while the new segments are built and written on the other, in under
64 MiB whatever the sizes. OUT may name an input (fold a day into history in
place).

The result is canonical: merging the indexes of parts of a data set gives the
same bytes as one build over all of it, and merging the N partitions of a
partitioned build (build --partition I/N) gives the bytes of the single build.
Inputs with different specs (hash, key recipe) are refused.

With --partition I/N only prefix range I of N is merged (the inputs' other
ranges are never read), so N machines can each merge their share of the same
inputs; merging the N results stitches them into the whole merge, byte for
byte.

Exit codes: 0 done; 2 bad usage, a spec mismatch, a damaged input or an I/O
error (nothing is published); 130/143 interrupted (nothing is published).`,
		Example: `  fpdedup merge -o history.fpx history.fpx today.fpx
  fpdedup merge --subtract -o new.fpx today.fpx history.fpx
  fpdedup merge -o all.fpx part-*.fpx
  fpdedup merge --partition 3/8 -o day-3.fpx slice-*.fpx   # machine 3 of 8
  fpdedup merge --partition auto/8 -o day-$JOB_COMPLETION_INDEX.fpx slice-*.fpx   # a Kubernetes Indexed Job's pod`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if output == "" {
				return usageErrorf("merge needs -o OUT.fpx")
			}
			if subtract && intersect {
				return usageErrorf("--subtract and --intersect exclude each other")
			}
			op := fpstore.Union
			name := "union"
			switch {
			case subtract:
				op, name = fpstore.Subtract, "subtract"
			case intersect:
				op, name = fpstore.Intersect, "intersect"
			}
			j := inv.job(cmd)
			part, err := j.partition(partition)
			if err != nil {
				return err
			}
			j.input("IDX", kindIndex, args...)
			j.output("-o", output, kindIndex) // in place: merge -o H H today
			prog := &ingest.Progress{}
			j.progress(prog)
			j.memory(memplan.Merge(inv.mem))
			var xs []*fpstore.Index
			defer func() {
				for _, x := range xs {
					x.Close()
				}
			}()
			return j.run(func(ctx context.Context) (map[string]any, error) {
				var total int64
				for _, p := range args {
					x, err := fpstore.Open(p)
					if err != nil {
						return nil, err
					}
					xs = append(xs, x)
					total += int64(x.Len())
				}
				prog.Total.Store(total)
				start := time.Now()
				st, err := fpstore.Merge(output, xs, fpstore.MergeOptions{Op: op, Threads: inv.threads, Partition: part, Group: j.grp, Progress: func(n uint64) error {
					prog.RawBytes.Store(int64(n))
					prog.Records.Store(int64(n))
					return context.Cause(ctx)
				}})
				secs := time.Since(start).Seconds()
				j.summary("merge (%s): %s, %d fingerprints in, %d out, partition %s, %.2f s, %s fingerprints/s → %s",
					name, counted(st.Inputs, "index"), st.InputKeys, st.Fingerprints, st.Range, secs, humanRate(float64(st.InputKeys)/max(secs, 1e-9)), output)
				return map[string]any{"op": name, "inputs": args, "output": output, "merge": st, "seconds": secs}, err
			})
		},
	}
	f := cmd.Flags()
	f.StringVarP(&output, "output", "o", "", "the index to write (required; may name an input)")
	f.BoolVar(&subtract, "subtract", false, "the first index minus all the others")
	f.BoolVar(&intersect, "intersect", false, "what every index holds")
	f.StringVar(&partition, "partition", "", partitionUsage+"; the N results merge by stitching")
	return cmd
}
