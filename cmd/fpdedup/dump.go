package main

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/fpstore"
)

func newDumpCommand(inv *invocation) *cobra.Command {
	return &cobra.Command{
		Use:   "dump IDX",
		Short: "Print an index's fingerprints, sorted, as hex",
		Long: `Dump prints every fingerprint of IDX as 32 lowercase hex digits, one a line,
in ascending order: the inverse of build --format fp, and what comm, sort -m
and diff read. Every page is checked before it is printed.

Exit codes: 0 done; 2 error (damage included: nothing that verify would
reject is printed); 130/143 interrupted; 141 the reader closed the pipe.`,
		Example: `  fpdedup dump day.fpx | head
  comm -23 <(fpdedup dump a.fpx) <(fpdedup dump b.fpx) | wc -l`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			x, err := fpstore.Open(args[0])
			if err != nil {
				return err
			}
			defer x.Close()
			j := inv.job(cmd)
			j.input("IDX", kindIndex, args[0])
			out := j.stream("stdout", "")
			return j.run(func(ctx context.Context) (map[string]any, error) {
				line := make([]byte, 0, 33)
				var n int
				err := x.Scan(func(fps []fpstore.Fingerprint) error {
					if err := ctx.Err(); err != nil {
						return err
					}
					n += len(fps)
					for _, fp := range fps {
						line = append(fp.AppendHex(line[:0]), '\n')
						if _, err := out.w.Write(line); err != nil {
							return err
						}
					}
					return nil
				})
				return map[string]any{"index": args[0], "fingerprints": n}, err
			})
		},
	}
}
