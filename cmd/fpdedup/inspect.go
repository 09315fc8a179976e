package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/internal/units"
)

func newInspectCommand(g *globals) *cobra.Command {
	var asJSON bool
	var probes int
	cmd := &cobra.Command{
		Use:   "inspect IDX",
		Short: "Describe an index: spec, size, segments, filter",
		Long: `Inspect prints what an index is: its fingerprint spec (hash and key recipe),
format version, fingerprint count, covered range, segments, bytes per key, and
its filters' kind, bits per key and false-positive rate, in theory and as
measured on random probes from a fixed seed.

Exit codes: 0 done; 2 error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// The index is opened and closed by the work itself, which an
			// interrupt abandons: it must not be unmapped under it.
			var in fpstore.Info
			err := interruptible(cmd.Context(), func() error {
				x, err := fpstore.Open(args[0])
				if err != nil {
					return err
				}
				defer x.Close()
				in, err = x.Info(probes)
				return err
			})
			if err != nil {
				return err
			}
			if asJSON {
				b, _ := json.MarshalIndent(in, "", "  ")
				_, err = fmt.Fprintf(g.stdout, "%s\n", b)
				return err
			}
			key := "whole record"
			if len(in.Key) > 0 {
				key = fmt.Sprintf("%s joined by %q", strings.Join(in.Key, ","), in.KeySep)
			}
			w := bufio.NewWriter(g.stdout)
			fmt.Fprintf(w, "index          %s\n", in.Path)
			fmt.Fprintf(w, "format         v%d\n", in.FormatVersion)
			fmt.Fprintf(w, "hash           %s (%d bits)\n", in.Hash, in.HashBits)
			fmt.Fprintf(w, "key            %s\n", key)
			fmt.Fprintf(w, "partition      %s\n", in.Partition)
			fmt.Fprintf(w, "fingerprints   %d\n", in.Fingerprints)
			if in.Fingerprints > 0 {
				fmt.Fprintf(w, "range          %s .. %s\n", in.First, in.Last)
			}
			fmt.Fprintf(w, "segments       %d (%d to %d fingerprints; at most %d)\n", in.Segments, in.SmallestSegment, in.LargestSegment, in.SegmentMax)
			fmt.Fprintf(w, "size           %s, %.3f bytes/key\n", units.FormatBytes(in.FileBytes), in.BytesPerKey)
			fmt.Fprintf(w, "directory      %s\n", units.FormatBytes(int64(in.DirectoryBytes)))
			fmt.Fprintf(w, "filter         %s, %.2f bits/key, false positives %.3f%% in theory, %.3f%% measured on %d probes\n",
				in.FilterKind, in.FilterBitsPerKey, 100*in.FilterFPRTheory, 100*in.FilterFPRMeasured, in.FilterProbes)
			return w.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&probes, "probes", 1_000_000, "random probes for the measured false-positive rate")
	return cmd
}
