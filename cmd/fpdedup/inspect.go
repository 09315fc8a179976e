package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fpdedup/fpdedup/fpstore"
	"github.com/fpdedup/fpdedup/ingest"
	"github.com/fpdedup/fpdedup/internal/units"
)

func newInspectCommand(inv *invocation) *cobra.Command {
	var asJSON bool
	var probes int
	cmd := &cobra.Command{
		Use:   "inspect IDX",
		Short: "Describe an index: spec, size, segments, filter",
		Long: `Inspect prints what an index is: its fingerprint spec (hash and key recipe:
the record format its records were read in, whether csv/tsv records have a
header (they do when the key fields are named, not column numbers), the key
fields and their separator, or "whole record"; records read against the index
later default to this recipe), format version, fingerprint count, covered range, segments, bytes per key, and
its filters' kind, bits per key and false-positive rate, in theory and as
measured on random probes from a fixed seed.

Exit codes: 0 done; 2 error.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			j := inv.job(cmd)
			j.input("IDX", kindIndex, args[0])
			out := j.stream("stdout", "")
			return j.run(func(ctx context.Context) (map[string]any, error) {
				// The index is opened and closed by the work itself, which
				// an interrupt abandons: it must not be unmapped under it.
				var in fpstore.Info
				var spec fpstore.Spec
				err := interruptible(ctx, func() error {
					x, err := fpstore.Open(args[0])
					if err != nil {
						return err
					}
					defer x.Close()
					spec = x.Spec()
					in, err = x.Info(probes)
					return err
				})
				if err != nil {
					return nil, err
				}
				rec := recordsOf(spec)
				figures := map[string]any{"inspect": inspectJSON{in, rec}}
				if asJSON {
					b, _ := json.MarshalIndent(inspectJSON{in, rec}, "", "  ")
					fmt.Fprintf(out.w, "%s\n", b)
				} else {
					writeInspect(out.w, in, rec)
				}
				return figures, nil
			})
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	cmd.Flags().IntVar(&probes, "probes", 1_000_000, "random probes for the measured false-positive rate")
	return cmd
}

// inspectRecords is how an index's records are read (its recorded recipe,
// as ingest.KeySpecOf gives it to dedup --against, query and reconcile).
type inspectRecords struct {
	Format      string `json:"record_format"` // csv, tsv, jsonl; lines for whole records
	Header      bool   `json:"header"`        // csv/tsv: the first record names the fields
	WholeRecord bool   `json:"whole_record"`  // no key fields: the whole record is the key
}

// inspectJSON is what inspect --json prints: the index's Info and its
// records' recipe.
type inspectJSON struct {
	fpstore.Info
	inspectRecords
}

func recordsOf(s fpstore.Spec) inspectRecords {
	ks, ok, err := ingest.KeySpecOf(s)
	switch {
	case !ok:
		return inspectRecords{Format: "lines", WholeRecord: true}
	case err != nil:
		return inspectRecords{Format: cmp.Or(s.Format, "unknown")} // unknown to this version
	}
	return inspectRecords{Format: ks.Format.String(), Header: ks.Header}
}

func (r inspectRecords) String() string {
	switch {
	case r.Format != "csv" && r.Format != "tsv":
		return r.Format
	case r.Header:
		return r.Format + ", with a header (the key fields are named)"
	}
	return r.Format + ", no header assumed (the key fields are column numbers)"
}

func writeInspect(w io.Writer, in fpstore.Info, rec inspectRecords) {
	key := "whole record"
	if len(in.Key) > 0 {
		key = fmt.Sprintf("%s joined by %q", strings.Join(in.Key, ","), in.KeySep)
	}
	fmt.Fprintf(w, "index          %s\n", in.Path)
	fmt.Fprintf(w, "format         v%d\n", in.FormatVersion)
	fmt.Fprintf(w, "hash           %s (%d bits)\n", in.Hash, in.HashBits)
	fmt.Fprintf(w, "records        %s\n", rec)
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
}
