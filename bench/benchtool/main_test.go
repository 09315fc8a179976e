package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/fpdedup/fpdedup/bench"
)

func TestParseCount(t *testing.T) {
	for in, want := range map[string]int64{"0": 0, "12": 12, "3k": 3000, "10M": 10_000_000, "2G": 2_000_000_000} {
		if got, err := parseCount(in); err != nil || got != want {
			t.Errorf("parseCount(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "-1", "1.5M", "M", "10x", "99999999999G"} {
		if _, err := parseCount(in); err == nil {
			t.Errorf("parseCount(%q) accepted", in)
		}
	}
}

// gen writes exactly what bench.Generate writes, and --repeat 0 means none
// on the command line (where 0 is no longer "the default").
func TestGen(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "x.txt")
	var stdout, stderr bytes.Buffer
	if err := genMain([]string{"--records", "2k", "--seed", "9", "-o", out, "--stats"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var want bytes.Buffer
	st, err := bench.Generate(&want, bench.GenOptions{Records: 2000, Seed: 9})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Errorf("gen -o differs from bench.Generate")
	}
	var stats map[string]int64
	if err := json.Unmarshal(stderr.Bytes(), &stats); err != nil || stats["distinct"] != st.Distinct || stats["bytes"] != st.Bytes {
		t.Errorf("--stats = %q (%v), want %+v", stderr.String(), err, st)
	}

	stdout.Reset()
	if err := genMain([]string{"--records", "1000", "--repeat", "0", "--plan"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	var plan map[string]int64
	if err := json.Unmarshal(stdout.Bytes(), &plan); err != nil || plan["distinct"] != 1000 {
		t.Errorf("--repeat 0 --plan = %q, want 1000 distinct", stdout.String())
	}

	if err := genMain([]string{"--format", "xml", "-o", out}, &stdout, &stderr); err == nil {
		t.Errorf("--format xml accepted")
	}
	if _, err := os.Stat(out); err == nil {
		t.Errorf("a failed gen left %s behind", out)
	}
}

const hyperfineJSON = `{"results": [
 {"command": "fpdedup build", "mean": 0.5, "stddev": 0.01, "median": 0.4, "user": 0.6, "system": 0.1, "min": 0.39, "max": 0.6, "times": [0.39, 0.4, 0.6], "exit_codes": [0,0,0]},
 {"command": "sort -u", "mean": 4.4, "stddev": 0.1, "median": 4.48, "user": 7, "system": 0.5, "min": 4.3, "max": 4.6, "times": [4.3, 4.48, 4.6], "exit_codes": [0,0,0]},
 {"command": "floor: cat", "mean": 0.1, "stddev": 0.0, "median": 0.1, "user": 0, "system": 0.1, "min": 0.1, "max": 0.1, "times": [0.1], "exit_codes": [0]},
 {"command": "duckdb", "mean": 2, "stddev": 0.1, "median": 2, "user": 3, "system": 0.5, "min": 1.9, "max": 2.1, "times": [2], "exit_codes": [0]}
]}`

func TestReport(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	meta := write("meta", "date=D\nrecords=10000000\ndistinct=6200000\nbytes=512000000\nruns=3\n"+
		"ref.build=fpdedup build\ntitle.build=exact set\nref.query=fpdedup query\nindex_bytes=99200000\nnote=hello\n")
	rows := write("rows", strings.Join([]string{
		"build\tfpdedup build\tok\t153600\t6200000\tfpdedup build -o X F",
		"build\tfloor: cat\tok\t2048\t\tcat F > /dev/null",
		"build\tsort -u\tok\t\t\tsort -u F | tr a b",
		"build\tduckdb\tok\t204800\t6199999\tnode d.mjs F",
		"build\tbloom\tmissing: bloom not installed (bench/peers.sh)\t\t\tbloom …",
		"query\tfpdedup query\tfailed: exit 1: absent\t\t\tfpdedup query X",
		"query\tbloom check\tok\t\t\tbloom check",
	}, "\n")+"\n")
	hf := write("hf.json", hyperfineJSON)
	md, js := filepath.Join(dir, "out.md"), filepath.Join(dir, "out.json")
	var stdout bytes.Buffer
	err := reportMain([]string{"--meta", meta, "--rows", rows, "--hyperfine", "build=" + hf,
		"--inspect", filepath.Join(dir, "no-such-file"), "--md", md, "--json", js}, &stdout)
	if err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, want := range []string{
		"10,000,000 records",
		"6,200,000 distinct",
		"**Note:** hello",
		"## build: exact set",
		"| fpdedup build | 0.400 | 0.390–0.600 | 0.700 | 150 | 1.00× | 6200000 ✓ |",
		"| sort -u | 4.480 | 4.300–4.600 | 7.500 | — | 11.2× |  |",
		"| duckdb | 2.000 | 1.900–2.100 | 3.500 | 200 | 5.00× | 6199999 ✗ WRONG (want 6200000) |",
		"| bloom | missing: bloom not installed (bench/peers.sh) |",
		"| fpdedup query | failed: exit 1: absent |",
		"| bloom check | not timed (hyperfine failed) |",
		"- sort -u / fpdedup build = 11.2×\n- duckdb / fpdedup build = 5.00×\n",
		"No ratios: fpdedup query was not timed.",
		"16.00 bytes per distinct key (file size / distinct keys): 99,200,000 bytes for 6,200,000 keys.",
		"| sort -u | `sort -u F \\| tr a b` |",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q\n%s", want, out)
		}
	}
	if strings.Contains(out, "floor: cat / fpdedup build") {
		t.Errorf("a floor is listed among the peers' ratios")
	}
	if b, err := os.ReadFile(md); err != nil || string(b) != out {
		t.Errorf("--md file differs from stdout (%v)", err)
	}
	var rep report
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if r := rep.Jobs[0].Rows[2]; r.Name != "sort -u" || math.Abs(*r.Ratio-11.2) > 1e-9 || len(r.TimesS) != 3 {
		t.Errorf("raw JSON row = %+v (ratio %v)", r, *r.Ratio)
	}
	if _, ok := rep.Hyperfine["build"]; !ok {
		t.Errorf("raw JSON lacks hyperfine's own export")
	}

	// inspect's own figure wins over the file size.
	ins := write("inspect.json", `{"fingerprints": 6200000, "bytes_per_key": 16.5}`)
	stdout.Reset()
	if err := reportMain([]string{"--meta", meta, "--rows", rows, "--inspect", ins}, &stdout); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(stdout.String(), "16.50 bytes per distinct key (inspect --json bytes_per_key)") {
		t.Errorf("inspect's bytes_per_key not used:\n%s", stdout.String())
	}
}

// The columns and checks of the dedup and merge benchmarks: a title and a
// summary of their own, a sampled anonymous peak, GB/s from meta, answers
// checked per job or per row, and no index section.
func TestReportExtras(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	meta := write("meta", "date=D\nbench=merge\nsummary=two indexes of 5 keys\nruns=3\n"+
		"ref.build=fpdedup build\ndistinct=1\ndistinct.build=6200000\nexpect.build.duckdb=6199999\n"+
		"gbps_bytes.build=800000000\ngbps_bytes.build.sort -u=1600000000\n"+
		"check.02=second\ncheck.01=first\n")
	rows := write("rows", strings.Join([]string{
		"build\tfpdedup build\tok\t153600\t6200000\tfpdedup build -o X F",
		"build\tsort -u\tok\t\t6200001\tsort -u F",
		"build\tduckdb\tok\t204800\t6199999\tnode d.mjs F",
		"build\tbloom\tmissing: no bloom\t\t\tbloom …",
	}, "\n")+"\n")
	anon := write("anon", "build\tfpdedup build\t51200\nbuild\tduckdb\t\n")
	hf := write("hf.json", hyperfineJSON)
	var stdout bytes.Buffer
	if err := reportMain([]string{"--meta", meta, "--rows", rows, "--hyperfine", "build=" + hf, "--anon", anon}, &stdout); err != nil {
		t.Fatal(err)
	}
	out := stdout.String()
	for _, want := range []string{
		"# fpdedup merge benchmark, D\n\ntwo indexes of 5 keys  \n",
		"| tool | median wall s | min–max s | user+sys s | peak RSS MB | peak anon MB | GB/s | ÷ fpdedup build | answer |\n" +
			"| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n",
		"| fpdedup build | 0.400 | 0.390–0.600 | 0.700 | 150 | 50 | 2.00 | 1.00× | 6200000 ✓ |",
		"| sort -u | 4.480 | 4.300–4.600 | 7.500 | — | — | 0.36 | 11.2× | 6200001 ✗ WRONG (want 6200000) |",
		"| duckdb | 2.000 | 1.900–2.100 | 3.500 | 200 | — | 0.40 | 5.00× | 6199999 ✓ |",
		"| bloom | missing: no bloom | | | — | — | | |  |",
		"\n## checks (untimed)\n\n- first\n- second\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q\n%s", want, out)
		}
	}
	if strings.Contains(out, "index size") || strings.Contains(out, "records (") {
		t.Errorf("report has the foundation's index section or records line:\n%s", out)
	}
}
