package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/fpstore"
)

func newVerifyCommand(inv *invocation) *cobra.Command {
	return &cobra.Command{
		Use:   "verify IDX",
		Short: "Check every byte of an index",
		Long: `Verify checks every checksum (header, trailer, footer, every page), the
structure, order and uniqueness of the fingerprints, the counts, the segment
boundaries, and the directories and filters (rebuilt and compared byte for
byte: the format is canonical).

Exit codes: 0 the index is sound; 1 it is damaged (truncation included; each
problem is named with its segment and offset); 2 it is not an index, its
format version is unsupported, or it cannot be read.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j := inv.job(cmd)
			j.input("IDX", kindIndex, args[0])
			out := j.stream("stdout", "")
			return j.run(func(ctx context.Context) (map[string]any, error) {
				var rep *fpstore.VerifyReport
				err := interruptible(ctx, func() (err error) {
					rep, err = fpstore.Verify(args[0])
					return err
				})
				if err != nil {
					return nil, err
				}
				figures := map[string]any{"verify": map[string]any{"index": args[0], "segments": rep.Segments, "fingerprints": rep.Fingerprints, "problems": len(rep.Problems)}}
				for _, p := range rep.Problems {
					fmt.Fprintf(out.w, "%s: %s\n", args[0], p)
				}
				if len(rep.Problems) > 0 {
					return figures, negativeAnswer{fmt.Sprintf("%s is damaged (%s found)", args[0], counted(len(rep.Problems), "problem"))}
				}
				j.summary("%s: ok (%s in %s)", args[0], counted(rep.Fingerprints, "fingerprint"), counted(rep.Segments, "segment"))
				return figures, nil
			})
		},
	}
}

// counted says n things, in the singular for one: "1 segment", "2
// segments", "2 indexes".
func counted[N int | int64 | uint64](n N, thing string) string {
	switch {
	case n == 1:
		return "1 " + thing
	case strings.HasSuffix(thing, "x"), strings.HasSuffix(thing, "s"):
		return fmt.Sprintf("%d %ses", n, thing)
	}
	return fmt.Sprintf("%d %ss", n, thing)
}
