package pipeline

import (
	"cmp"
	"fmt"
	"io"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/fpdedup/fpdedup/internal/rbloom"
	"github.com/fpdedup/fpdedup/internal/units"
)

// formatBits writes a size in bits as given most often: 2^N for powers of
// two.
func formatBits(b uint64) string {
	if b > 1 && b&(b-1) == 0 {
		return fmt.Sprintf("2^%d", bits.TrailingZeros64(b))
	}
	return strconv.FormatUint(b, 10)
}

// WriteReport prints the report of a replay with opts: the truth, then
// the primary system tier by tier, then with a sweep the sizing table.
func (st ReplayStats) WriteReport(w io.Writer, opts ReplayOptions) error {
	var b strings.Builder
	order := "in time order"
	switch {
	case opts.Arrival:
		order = fmt.Sprintf("in arrival order, %d late", st.Late)
	case opts.TimeField == "":
		order = "in input order"
	}
	fmt.Fprintf(&b, "events %d, first occurrences %d, duplicates %d (%s", st.Events, st.FirstOccurrences, st.Duplicates, order)
	if opts.L1 != nil {
		fmt.Fprintf(&b, "; %d L1 windows of %s", st.Windows, opts.L1.TTL)
	}
	b.WriteString(")\n\n")
	p := st.Systems[0]
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	head := []string{""}
	var tiers []*ReplayTier
	var sizes []string
	if p.L1 != nil {
		head = append(head, "L1")
		tiers = append(tiers, p.L1)
		sizes = append(sizes, fmt.Sprintf("%s bits, ttl %s", formatBits(opts.L1.Bits), opts.L1.TTL))
	}
	if p.L2 != nil {
		head = append(head, "L2")
		tiers = append(tiers, p.L2)
		if rb := opts.RedisBloom; rb != nil {
			sizes = append(sizes, fmt.Sprintf("RedisBloom, %s, capacity %d, %s", rbRouting(rb), p.L2Capacity, rbGrowth(rb)))
		} else {
			sizes = append(sizes, fmt.Sprintf("%d shards of %s bits, k=%d", opts.L2.Shards, formatBits(p.L2Bits), opts.L2.K))
		}
	}
	fmt.Fprintln(tw, strings.Join(head, "\t"))
	row := func(name string, f func(i int, t *ReplayTier) string) {
		cells := []string{name}
		for i, t := range tiers {
			cells = append(cells, f(i, t))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	row("size", func(i int, _ *ReplayTier) string { return sizes[i] })
	row("memory", func(_ int, t *ReplayTier) string { return units.FormatBytes(t.Bytes) })
	row("reached", func(_ int, t *ReplayTier) string { return strconv.FormatInt(t.Reached, 10) })
	row("dropped", func(_ int, t *ReplayTier) string { return strconv.FormatInt(t.Dropped, 10) })
	row("false drops (lost)", func(_ int, t *ReplayTier) string { return strconv.FormatInt(t.FalseDrops, 10) })
	row("duplicates passed", func(_ int, t *ReplayTier) string { return strconv.FormatInt(t.DupsPassed, 10) })
	row("fp rate measured", func(_ int, t *ReplayTier) string {
		return fmt.Sprintf("%s (%d of %d first occurrences)", percent(t.FPRMeasured), t.FalseDrops, t.FirstsReached)
	})
	row("fp rate formula", func(_ int, t *ReplayTier) string { return percent(t.FPRFormula) + " (at each one's fill)" })
	row("fill", func(i int, t *ReplayTier) string {
		switch {
		case tiers[i] == p.L1:
			return fmt.Sprintf("%d keys in the fullest window: formula %s", t.Keys, percent(t.FPRFinal))
		case opts.RedisBloom != nil:
			return fmt.Sprintf("%d items at the end: fp rate now %s from the bits set, formula %s (mean of the shards)", t.Keys, percent(t.FPRNow), percent(t.FPRFinal))
		}
		return fmt.Sprintf("%d keys at the end: formula %s", t.Keys, percent(t.FPRFinal))
	})
	if opts.RedisBloom != nil && opts.RedisBloom.NonScaling {
		row("refused (full)", func(i int, t *ReplayTier) string {
			if tiers[i] == p.L1 {
				return ""
			}
			return strconv.FormatInt(t.Refused, 10)
		})
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintf(&b, "\nonline: %d accepted, %d dropped; %d first occurrences lost (false drops), %d duplicates let through\n", p.Accepted, p.Dropped, p.Lost, p.LetThrough)
	if opts.RedisBloom != nil {
		if err := writeRBShards(&b, opts.RedisBloom, p); err != nil {
			return err
		}
		if len(st.Systems) > 1 {
			if err := writeRBSweep(&b, opts.RedisBloom, st.Systems); err != nil {
				return err
			}
		}
	} else if len(st.Systems) > 1 {
		fmt.Fprintf(&b, "\nL2 sweep: %d shards, k=%d, one pass (lost: first occurrences dropped by either tier; * the --l2 system above)\n", opts.L2.Shards, opts.L2.K)
		tw = tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "bits/shard\tmemory\tbits/key\tlost\tL2 false drops\tlet through\tL2 fp measured\tformula\tat the end")
		systems := slices.Clone(st.Systems)
		slices.SortStableFunc(systems, func(a, b ReplaySystem) int { return cmp.Compare(a.L2Bits, b.L2Bits) })
		for _, s := range systems {
			mark := ""
			if s.L2Bits == p.L2Bits {
				mark = " *"
			}
			bpk := "-"
			if s.L2.Keys > 0 {
				bpk = strconv.FormatFloat(float64(opts.L2.Shards*s.L2Bits)/float64(s.L2.Keys), 'f', 1, 64)
			}
			fmt.Fprintf(tw, "%s%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", formatBits(s.L2Bits), mark, units.FormatBytes(s.L2.Bytes), bpk,
				s.Lost, s.L2.FalseDrops, s.LetThrough, percent(s.L2.FPRMeasured), percent(s.L2.FPRFormula), percent(s.L2.FPRFinal))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// percent writes a rate as a percentage with three significant digits,
// without an exponent (0.0000477%).
func percent(r float64) string {
	v := 100 * r
	if v <= 0 {
		return "0%"
	}
	digits := min(max(2-int(math.Floor(math.Log10(v))), 0), 12)
	return strconv.FormatFloat(v, 'f', digits, 64) + "%"
}

// rbRouting describes the RedisBloom tier's shards, item and router.
func rbRouting(rb *ReplayRedisBloom) string {
	return fmt.Sprintf("%d shards by %s, item %s", rb.Router.Shards(), rb.Router.Route(), rb.Item)
}

// rbGrowth describes BF.RESERVE's error and growth.
func rbGrowth(rb *ReplayRedisBloom) string {
	e := strconv.FormatFloat(rb.Error, 'g', -1, 64)
	if rb.NonScaling {
		return "error " + e + ", nonscaling"
	}
	return fmt.Sprintf("error %s, expansion %d", e, cmp.Or(rb.Expansion, rbloom.DefaultExpansion))
}

// writeRBShards prints each shard's filter at the end and its decisions.
func writeRBShards(b *strings.Builder, rb *ReplayRedisBloom, p ReplaySystem) error {
	fmt.Fprintf(b, "\nL2 shards: each filter at the end (BF.INFO's figures; fill and fp rate from its bits) and what it decided\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	head := "shard\titems\tsub-filters\tcapacity\tmemory\tfill\tfp rate now\treached\tdropped\tfalse drops (lost)\tduplicates passed"
	if rb.NonScaling {
		head += "\trefused (full)"
	}
	fmt.Fprintln(tw, head)
	for _, s := range p.L2.Shards {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t%s\t%s\t%d\t%d\t%d\t%d", s.Name, s.Items, s.SubFilters, s.Capacity, units.FormatBytes(s.Bytes),
			percent(s.Fill), percent(s.FPRNow), s.Reached, s.Dropped, s.FalseDrops, s.DupsPassed)
		if rb.NonScaling {
			fmt.Fprintf(tw, "\t%d", s.Refused)
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

// writeRBSweep prints the sizing table of a sweep of capacities.
func writeRBSweep(b *strings.Builder, rb *ReplayRedisBloom, systems []ReplaySystem) error {
	p := systems[0]
	fmt.Fprintf(b, "\nL2 sweep: RedisBloom, %s, %s, one pass (lost: first occurrences dropped by either tier; * the --l2 system above)\n", rbRouting(rb), rbGrowth(rb))
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "capacity\tmemory\tsub-filters\tlost\tL2 false drops\tlet through\tL2 fp measured\tformula\tfp now")
	systems = slices.Clone(systems)
	slices.SortStableFunc(systems, func(a, b ReplaySystem) int { return cmp.Compare(a.L2Capacity, b.L2Capacity) })
	for _, s := range systems {
		mark := ""
		if s.L2Capacity == p.L2Capacity {
			mark = " *"
		}
		lo, hi := math.MaxInt, 0
		for _, sh := range s.L2.Shards {
			lo, hi = min(lo, sh.SubFilters), max(hi, sh.SubFilters)
		}
		links := strconv.Itoa(lo)
		if hi > lo {
			links += "-" + strconv.Itoa(hi)
		}
		fmt.Fprintf(tw, "%d%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", s.L2Capacity, mark, units.FormatBytes(s.L2.Bytes), links,
			s.Lost, s.L2.FalseDrops, s.LetThrough, percent(s.L2.FPRMeasured), percent(s.L2.FPRFormula), percent(s.L2.FPRNow))
	}
	return tw.Flush()
}
