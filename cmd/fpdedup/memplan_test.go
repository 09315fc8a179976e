package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
)

// TestJobMemoryPlan: every command that sizes memory from --mem declares
// its plan through the job: the Go heap's limit while the work runs is the
// plan's (build's no longer all of --mem beside its sorter's arenas), and
// --stats-json and --metrics carry each share, whose sum is within --mem.
func TestJobMemoryPlan(t *testing.T) {
	dir := t.TempDir()
	in := filepath.Join(dir, "in.txt")
	if err := os.WriteFile(in, []byte("a\nb\na\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ev := filepath.Join(dir, "ev.csv")
	if err := os.WriteFile(ev, []byte("id,at\n1,1000\n2,1001\n1,1002\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	idx := filepath.Join(dir, "in.fpx")
	if code, _, stderr := runInProcess("build", "-q", "-o", idx, in); code != 0 {
		t.Fatalf("build: exit %d\n%s", code, stderr)
	}
	shaIdx := filepath.Join(dir, "sha.fpx")
	if code, _, stderr := runInProcess("build", "-q", "--hash", "sha256", "-o", shaIdx, in); code != 0 {
		t.Fatalf("build: exit %d\n%s", code, stderr)
	}
	empty := filepath.Join(dir, "online.txt")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	const mem = 256 << 20
	for _, c := range []struct {
		name string
		args []string
		// heapBelowMem: the plan keeps memory off the Go heap, so its
		// limit is below --mem.
		heapBelowMem bool
	}{
		{"dedup", []string{"dedup", "-o", filepath.Join(dir, "d.txt"), in}, true},
		{"dedup", []string{"dedup", "--record", filepath.Join(dir, "r.fpx"), "-o", filepath.Join(dir, "d2.txt"), in}, true},
		{"dedup", []string{"dedup", "--keep", "last", "-o", filepath.Join(dir, "d3.txt"), in}, true},
		// --against: its indexes' cold reads take half the heap's part.
		{"dedup", []string{"dedup", "--against", idx, "-o", filepath.Join(dir, "d4.txt"), in}, true},
		{"dedup", []string{"dedup", "--keep", "last", "--against", idx, "-o", filepath.Join(dir, "d5.txt"), in}, true},
		{"count", []string{"count", "-o", filepath.Join(dir, "c.txt"), in}, true},
		{"build", []string{"build", "-o", filepath.Join(dir, "b.fpx"), in}, true},
		{"merge", []string{"merge", "-o", filepath.Join(dir, "m.fpx"), idx, idx}, false},
		{"query", []string{"query", idx, "a"}, false},
		{"replay", []string{"replay", "--format", "csv", "--header", "--key", "id", "--time-field", "at", "--l1", "1,ttl=1s", ev}, true},
		// An export file is read in no order: the sorter's arenas are off
		// the heap (exit 1: the index's keys are missing from it).
		{"reconcile", []string{"reconcile", "--index", shaIdx, "--online", "file:" + empty}, true},
	} {
		t.Run(strings.Join(c.args[:2], " "), func(t *testing.T) {
			stats, prom := filepath.Join(dir, "s.json"), filepath.Join(dir, "s.prom")
			var limit int64 = -1
			testHook = func(stage string) {
				if stage == "work" {
					limit = debug.SetMemoryLimit(-1)
				}
			}
			defer func() { testHook = nil }()
			args := append([]string{"-q", "--mem", "256MiB", "--stats-json", stats, "--metrics", prom}, c.args...)
			if code, _, stderr := runInProcess(args...); code != 0 && (c.name != "reconcile" || code != 1) {
				t.Fatalf("exit %d\n%s", code, stderr)
			}
			b, err := os.ReadFile(stats)
			if err != nil {
				t.Fatal(err)
			}
			var st struct {
				Memory struct {
					Plan map[string]int64 `json:"plan"`
					Peak map[string]int64 `json:"peak"`
				} `json:"memory"`
			}
			if err := json.Unmarshal(b, &st); err != nil {
				t.Fatal(err)
			}
			p := st.Memory.Plan
			if p["mem_bytes"] != mem || p["heap_bytes"] == 0 {
				t.Fatalf("no plan of --mem 256MiB in --stats-json:\n%s", b)
			}
			if reads := c.name == "query" || slices.Contains(c.args, "--against"); reads != (p["read_buffers_bytes"] > 0) {
				t.Errorf("read buffers %d in the plan of %s", p["read_buffers_bytes"], c.name)
			}
			var within int64
			for k, n := range p {
				switch k {
				case "mem_bytes", "row_groups_bytes", "max_record_bytes",
					// limits held within the heap's share
					"records_bytes", "max_reply_bytes", "reply_streams", "read_ahead_bytes", "spool_bytes", "filter_headers_bytes", "values_bytes", "etcd_recv_bytes", "etcd_page_bytes":
				default:
					within += n
				}
			}
			if within > mem {
				t.Errorf("the shares take %d bytes of --mem %d: %v", within, int64(mem), p)
			}
			if want := p["heap_bytes"] + p["fixed_bytes"] + p["filters_bytes"] + p["read_buffers_bytes"] + p["row_groups_bytes"]; limit != want {
				t.Errorf("the heap's limit while the work ran was %d, the plan's %d", limit, want)
			}
			if c.heapBelowMem && limit >= mem {
				t.Errorf("the heap's limit while the work ran was %d: all of --mem beside the shares off the heap", limit)
			}
			// The shares' peaks: the heap's within its limit's reach (a
			// soft limit: the GC may run past it between cycles), those
			// off it within the plan's shares off it.
			pk := st.Memory.Peak
			if pk["heap_bytes"] <= 0 {
				t.Errorf("no heap peak in --stats-json: %v", pk)
			}
			if off := p["tables_bytes"] + p["seen_blooms_bytes"] + p["sorter_bytes"] + p["sim_blooms_bytes"] + max(p["bloom_pass_bytes"], p["rebuild_buffers_bytes"]); pk["off_heap_bytes"] > off+16<<20 {
				t.Errorf("%d bytes off the heap at the peak, beyond the plan's %d: %v", pk["off_heap_bytes"], off, pk)
			}
			m, err := os.ReadFile(prom)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(m), "\nfpdedup_"+c.name+"_memory_peak_heap_bytes ") {
				t.Errorf("no heap peak in --metrics:\n%s", m)
			}
			if !strings.Contains(string(m), "\nfpdedup_"+c.name+"_memory_plan_heap_bytes ") {
				t.Errorf("no plan in --metrics:\n%s", m)
			}
		})
	}
}
