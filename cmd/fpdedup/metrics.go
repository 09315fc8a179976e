package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/fpdedup/fpdedup/internal/atomicfile"
)

// writeMetrics writes the run's numeric figures (those of --stats-json) as
// Prometheus gauges in text format, for node_exporter's textfile collector:
// cron jobs are watched that way. Names are fpdedup_<command>_<figure>;
// the file is published with the command's other outputs.
func (inv *invocation) writeMetrics(grp *atomicfile.Group, command string, stats map[string]any) error {
	if inv.metrics == "" {
		return nil
	}
	reg := prometheus.NewRegistry()
	flat := map[string]float64{}
	for k, v := range stats {
		if k == command {
			flatten("", v, flat) // {"command":"dedup","dedup":{…}}: no dedup_dedup_
		} else {
			flatten(k, v, flat)
		}
	}
	names := make([]string, 0, len(flat))
	for k := range flat {
		names = append(names, k)
	}
	sort.Strings(names)
	prefix := "fpdedup_" + metricName(command) + "_"
	for _, k := range names {
		gauge := prometheus.NewGauge(prometheus.GaugeOpts{Name: prefix + metricName(k), Help: fmt.Sprintf("fpdedup %s: %s of the last run", command, k)})
		gauge.Set(flat[k])
		if err := reg.Register(gauge); err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
	}
	done := prometheus.NewGauge(prometheus.GaugeOpts{Name: prefix + "last_success_timestamp_seconds", Help: "when the last successful run ended"})
	done.SetToCurrentTime()
	reg.MustRegister(done)
	families, err := reg.Gather()
	if err != nil {
		return fmt.Errorf("--metrics: %w", err)
	}
	var text bytes.Buffer
	for _, mf := range families {
		if _, err := expfmt.MetricFamilyToText(&text, mf); err != nil {
			return fmt.Errorf("--metrics: %w", err)
		}
	}
	if err := atomicfile.WriteFile(grp, inv.metrics, text.Bytes()); err != nil {
		return fmt.Errorf("cannot write --metrics: %w", err)
	}
	return nil
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
