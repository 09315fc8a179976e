package main

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// writeMetrics writes the run's numeric figures (those of --stats-json) as
// Prometheus gauges in text format, for node_exporter's textfile collector:
// cron jobs are watched that way. Names are fpdedup_<command>_<figure>;
// the file is published with the command's other outputs.
//
// The text format of a few gauges is written here, as expfmt writes it
// (families sorted by name, HELP escaped, floats in %g's shortest form),
// rather than through client_golang: linking it made every fpdedup
// process start 4 ms later, --version's included (24.2 vs 20.2 ms,
// hyperfine, 60 runs; its package inits alone ~2 ms by
// GODEBUG=inittrace=1), for a file few runs write.
func (inv *invocation) writeMetrics(grp *atomicfile.Group, command string, stats map[string]any) error {
	if inv.metrics == "" {
		return nil
	}
	flat := map[string]float64{}
	for k, v := range stats {
		if k == command {
			flatten("", v, flat) // {"command":"dedup","dedup":{…}}: no dedup_dedup_
		} else {
			flatten(k, v, flat)
		}
	}
	prefix := "fpdedup_" + metricName(command) + "_"
	type gauge struct {
		name, help string
		value      float64
	}
	gauges := make([]gauge, 0, len(flat)+1)
	seen := map[string]bool{}
	for k, v := range flat {
		name := prefix + metricName(k)
		if seen[name] {
			return fmt.Errorf("--metrics: two figures are named %s", name)
		}
		seen[name] = true
		gauges = append(gauges, gauge{name, fmt.Sprintf("fpdedup %s: %s of the last run", command, k), v})
	}
	done := prefix + "last_success_timestamp_seconds"
	if seen[done] {
		return fmt.Errorf("--metrics: two figures are named %s", done)
	}
	gauges = append(gauges, gauge{done, "when the last successful run ended", float64(time.Now().UnixNano()) / 1e9})
	slices.SortFunc(gauges, func(a, b gauge) int { return strings.Compare(a.name, b.name) })
	var text []byte
	for _, g := range gauges {
		text = fmt.Appendf(text, "# HELP %s %s\n# TYPE %s gauge\n%s %s\n", g.name, helpEscaper.Replace(g.help), g.name, g.name, promFloat(g.value))
	}
	if err := atomicfile.WriteFile(grp, inv.metrics, text); err != nil {
		return fmt.Errorf("cannot write --metrics: %w", err)
	}
	return nil
}

// helpEscaper escapes a HELP text as the text format wants.
var helpEscaper = strings.NewReplacer(`\`, `\\`, "\n", `\n`)

// promFloat is a sample value as the text format writes it.
func promFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "+Inf"
	case math.IsInf(f, -1):
		return "-Inf"
	case f == 0:
		return "0" // -0 too: a figure that rounds to no change is no negative
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// flatten collects the numbers of a JSON-shaped value under dotted keys.
func flatten(prefix string, v any, out map[string]float64) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			flatten(metricPath(prefix, k), x, out)
		}
	case float64:
		out[prefix] = t
	case bool:
		if t {
			out[prefix] = 1
		} else {
			out[prefix] = 0
		}
	}
}

// metricPath appends a key to a flattened figure's name.
func metricPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "_" + key
}

func metricName(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' {
			return r
		}
		return '_'
	}, s)
}

// asMap turns a stats value into the JSON-shaped map both outputs use.
func asMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}
