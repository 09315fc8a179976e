package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/fpdedup/fpdedup/bench/gen"
	"github.com/fpdedup/fpdedup/fpstore"
)

// The scale-out jobs (docs/SCALE-OUT.md) work on random 128-bit
// fingerprints, Records of them, built with build --format fp: the fast way
// to make big indexes without hashing records.
const (
	// partitions is N of build --partition I/N: a four-machine scale-out.
	partitions = 4
	// overlapPercent is the share of keys neighbouring overlapping indexes
	// have in common: a day's slices that repeat each other's events.
	overlapPercent = 20
)

// fpArgs are the flags that build an index of hex fingerprints.
var fpArgs = []string{"build", "--format", "fp", "--hash", "xxh3"}

// prepFingerprints writes all.hex, Records fingerprints of seed+1, once
// for both jobs that read it.
func (b *runner) prepFingerprints(ctx context.Context) (string, error) {
	hex := b.path("all.hex")
	if _, err := os.Stat(hex); err == nil {
		return hex, nil
	}
	b.progress(Step{Phase: "prepare", Msg: fmt.Sprintf("writing %d fingerprints", b.o.Records)})
	f, err := os.Create(hex)
	if err != nil {
		return "", err
	}
	err = gen.Fingerprints(ctxWriter{ctx, f}, b.o.Seed+1, 0, uint64(b.o.Records))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		if ctx.Err() != nil {
			return "", context.Cause(ctx)
		}
		return "", fmt.Errorf("bench: writing fingerprints: %w", err)
	}
	return hex, nil
}

// buildFromFingerprints builds out from fingerprints from..from+count of
// seed, streamed into fpdedup build --format fp.
func (b *runner) buildFromFingerprints(ctx context.Context, out string, seed, from, count uint64) error {
	r, w := io.Pipe()
	go func() { w.CloseWithError(gen.Fingerprints(w, seed, from, count)) }()
	_, err := b.tool(ctx, r, nil, append(append([]string{"--progress", "never", "-q"}, fpArgs...), "-o", out, "-")...)
	r.Close()
	return err
}

// countKeys is the number of fingerprints in an index, for the checks.
func countKeys(path string) (int64, error) {
	x, err := fpstore.Open(path)
	if err != nil {
		return 0, err
	}
	defer x.Close()
	return int64(x.Len()), nil
}

func fileSize(path string) int64 {
	st, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return st.Size()
}

// mergePartitionsJob merges the partitions of one key set (build
// --partition I/N of the same fingerprints), which only stitches segments,
// beside a k-way merge of as many overlapping indexes of the same total
// size, which merges every key.
func (b *runner) mergePartitionsJob() jobSpec {
	keys := b.o.Records
	quarter := keys / partitions
	step := quarter - quarter*overlapPercent/100
	union := quarter + (partitions-1)*step
	var parts, overs []string
	for i := range partitions {
		parts = append(parts, b.path(fmt.Sprintf("p%d.fpx", i)))
		overs = append(overs, b.path(fmt.Sprintf("o%d.fpx", i)))
	}
	single, stitched, kway := b.path("single.fpx"), b.path("parts.fpx"), b.path("kway.fpx")
	return jobSpec{
		name:  "merge-partitions",
		title: fmt.Sprintf("the %d partitions of one key set (build --partition I/%d), and a k-way merge of %d indexes overlapping by %d%%, as many keys in all", partitions, partitions, partitions, overlapPercent),
		input: fmt.Sprintf("p0..p%d.fpx", partitions-1), unit: "fingerprints", units: keys, distinct: keys,
		ref: fmt.Sprintf("fpdedup merge %d partitions", partitions),
		prep: func(ctx context.Context, j *Job) error {
			hex, err := b.prepFingerprints(ctx)
			if err != nil {
				return err
			}
			b.progress(Step{Phase: "prepare", Msg: "merge-partitions: building the partitions, the single index and the overlapping indexes"})
			for i, p := range parts {
				if _, err := b.tool(ctx, nil, nil, append(append([]string{"--progress", "never", "-q"}, fpArgs...), "--partition", fmt.Sprintf("%d/%d", i, partitions), "-o", p, hex)...); err != nil {
					return fmt.Errorf("build partition %d: %w", i, err)
				}
				j.InputBytes += fileSize(p)
			}
			if _, err := b.tool(ctx, nil, nil, append(append([]string{"--progress", "never", "-q"}, fpArgs...), "-o", single, hex)...); err != nil {
				return fmt.Errorf("build the single index: %w", err)
			}
			for i, o := range overs {
				if err := b.buildFromFingerprints(ctx, o, b.o.Seed+2, uint64(int64(i)*step), uint64(quarter)); err != nil {
					return fmt.Errorf("build overlapping index %d: %w", i, err)
				}
			}
			return nil
		},
		rows: []rowSpec{
			{tool: fmt.Sprintf("fpdedup merge %d partitions", partitions), kind: kindFpdedup,
				cmd:   b.fp(b.path("stats-parts.json"), append([]string{"merge", "-o", stitched}, parts...)...),
				stats: b.path("stats-parts.json"),
				verify: func(outStats, map[string]any) (string, *bool) {
					same, err := sameFile(stitched, single)
					switch {
					case err != nil:
						return "not compared with the single build: " + err.Error(), truth(false)
					case same:
						return "byte-identical to the single build of the same keys", truth(true)
					}
					return "bytes DIFFER from the single build of the same keys", truth(false)
				}},
			{tool: fmt.Sprintf("fpdedup merge %d overlapping indexes", partitions), kind: kindFpdedup,
				cmd: b.fp("", append([]string{"merge", "-o", kway}, overs...)...),
				verify: func(outStats, map[string]any) (string, *bool) {
					n, err := countKeys(kway)
					if err != nil {
						return err.Error(), truth(false)
					}
					return fmt.Sprintf("%d fingerprints, the union is %d", n, union), truth(n == union)
				}},
			{tool: "floor: cat partitions + dd conv=fsync of the output", kind: kindFloor, needs: []string{"sh", "cat", "dd"},
				cmd: b.floorWrite(parts, stitched)},
		},
	}
}

// buildPartitionsJob builds the index of the fingerprints once, and as the
// partitions a scale-out's machines build, two at a time (this machine's
// cores) and one alone (what each machine does).
func (b *runner) buildPartitionsJob() jobSpec {
	keys := b.o.Records
	hex := b.path("all.hex")
	built := b.path("built.fpx")
	q := shellQuote
	var ids []string
	for i := range partitions {
		ids = append(ids, fmt.Sprint(i))
	}
	twoAtATime := fmt.Sprintf("printf '%%s\\n' %s | xargs -P2 -I{} %s --progress never %s --partition {}/%d -o %s %s",
		strings.Join(ids, " "), q(b.exe), strings.Join(fpArgs, " "), partitions, q(b.path("bp{}.fpx")), q(hex))
	// samePartition compares a partition built here with the one the
	// merge-partitions job built beforehand, if it ran.
	samePartition := func(i int, path string) (string, bool) {
		n, err := countKeys(path)
		if err != nil {
			return err.Error(), false
		}
		msg := fmt.Sprintf("partition %d: %d fingerprints", i, n)
		ref := b.path(fmt.Sprintf("p%d.fpx", i))
		if _, err := os.Stat(ref); err != nil {
			return msg, true
		}
		if same, err := sameFile(path, ref); err != nil || !same {
			return msg + ", bytes DIFFER from the partition built alone", false
		}
		return msg + ", byte-identical to the one built alone", true
	}
	return jobSpec{
		name:  "build-partitions",
		title: fmt.Sprintf("the index of the fingerprints at once, or as %d partitions (the scale-out's machines); CPU is the work", partitions),
		input: "all.hex", unit: "fingerprints", units: keys, distinct: keys,
		ref: "fpdedup build",
		prep: func(ctx context.Context, j *Job) error {
			hex, err := b.prepFingerprints(ctx)
			j.InputBytes = fileSize(hex)
			return err
		},
		rows: []rowSpec{
			{tool: "fpdedup build", kind: kindFpdedup,
				cmd:   b.fp(b.path("stats-built.json"), append(append([]string{}, fpArgs...), "-o", built, hex)...),
				stats: b.path("stats-built.json"),
				verify: func(_ outStats, st map[string]any) (string, *bool) {
					got, ok := num(st, "build", "distinct")
					if !ok {
						return "no build.distinct in --stats-json", truth(false)
					}
					return fmt.Sprintf("%d distinct in the index of %d fingerprints", int64(got), keys), truth(int64(got) == keys)
				}},
			{tool: fmt.Sprintf("fpdedup build --partition I/%d ×%d, 2 at a time", partitions, partitions), kind: kindFpdedup,
				cmd: sh(twoAtATime),
				verify: func(outStats, map[string]any) (string, *bool) {
					var msgs []string
					ok := true
					var sum int64
					for i := range partitions {
						p := b.path(fmt.Sprintf("bp%d.fpx", i))
						m, good := samePartition(i, p)
						n, _ := countKeys(p)
						sum += n
						msgs = append(msgs, m)
						ok = ok && good
					}
					msgs = append(msgs, fmt.Sprintf("%d in all, want %d", sum, keys))
					return strings.Join(msgs, "; "), truth(ok && sum == keys)
				}},
			{tool: fmt.Sprintf("fpdedup build --partition 0/%d alone", partitions), kind: kindFpdedup,
				cmd: b.fp("", append(append([]string{}, fpArgs...), "--partition", fmt.Sprintf("0/%d", partitions), "-o", b.path("one.fpx"), hex)...),
				verify: func(outStats, map[string]any) (string, *bool) {
					m, ok := samePartition(0, b.path("one.fpx"))
					return m, truth(ok)
				}},
			catFloor(hex),
		},
	}
}
