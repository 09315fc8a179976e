package bench

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// The DuckDB peers are node scripts; they are embedded so that an
// installed fpdedup-bench can run them without the source tree.
// They load @duckdb/node-api from a .peers directory beside them, which Run
// links to Options.PeersDir.
//
//go:embed duckdb-peer.mjs duckdb-distinct.mjs duckdb-dedup.mjs duckdb-count.mjs duckdb-parquet.mjs
var duckScripts embed.FS

// Peer is a tool the benchmark runs beside fpdedup, or a floor (cat, zstd
// -dc, dd). A peer that is not installed is reported as missing, never
// silently dropped; with --peers none every peer is skipped.
type Peer struct {
	Name    string `json:"name"`
	Status  string `json:"status"` // ok, missing or skipped
	Version string `json:"version,omitempty"`
	Path    string `json:"path,omitempty"`
	Why     string `json:"why,omitempty"` // why missing or skipped
}

// peerCatalog is every peer: its command, how to ask its version, and the
// Debian package bench/peers.sh installs it from.
var peerCatalog = []struct {
	name, bin string
	version   []string
	pkg       string
}{
	{"sh", "sh", nil, "dash"},
	{"cat", "cat", []string{"--version"}, "coreutils"},
	{"dd", "dd", []string{"--version"}, "coreutils"},
	{"sort", "sort", []string{"--version"}, "coreutils"},
	{"mawk", "mawk", []string{"-W", "version"}, "mawk"},
	{"gawk", "gawk", []string{"--version"}, "gawk"},
	{"zstd", "zstd", []string{"--version"}, "zstd"},
	{"bloom", "bloom", []string{"--version"}, "golang-github-dcso-bloom-cli"},
	{"node", "node", []string{"--version"}, "nodejs"},
}

// duckdbPackage is where npm puts @duckdb/node-api under a --prefix.
const duckdbPackage = "node_modules/@duckdb/node-api/package.json"

// findPeers looks every peer up. mode "none" skips them all.
func findPeers(ctx context.Context, mode, peersDir string) map[string]*Peer {
	ps := map[string]*Peer{}
	for _, c := range peerCatalog {
		p := &Peer{Name: c.name}
		ps[c.name] = p
		if mode == "none" {
			p.Status, p.Why = "skipped", "--peers none"
			continue
		}
		path, err := exec.LookPath(c.bin)
		if err != nil {
			p.Status, p.Why = "missing", fmt.Sprintf("%s not on PATH (Debian package %s; bench/peers.sh installs it)", c.bin, c.pkg)
			continue
		}
		p.Status, p.Path = "ok", path
		if c.version != nil {
			p.Version = firstLine(ctx, path, c.version...)
		}
	}
	d := &Peer{Name: "duckdb"}
	ps["duckdb"] = d
	switch {
	case mode == "none":
		d.Status, d.Why = "skipped", "--peers none"
	case ps["node"].Status != "ok":
		d.Status, d.Why = "missing", "node is missing (DuckDB runs through node and @duckdb/node-api)"
	case peersDir == "":
		d.Status, d.Why = "missing", "no bench/.peers directory with @duckdb/node-api (run bench/peers.sh as root, or pass --peers-dir)"
	default:
		b, err := os.ReadFile(filepath.Join(peersDir, duckdbPackage))
		var pj struct {
			Version string `json:"version"`
		}
		if err == nil {
			err = json.Unmarshal(b, &pj)
		}
		if err != nil {
			d.Status, d.Why = "missing", fmt.Sprintf("@duckdb/node-api not installed in %s (run bench/peers.sh as root)", peersDir)
		} else {
			d.Status, d.Version, d.Path = "ok", "@duckdb/node-api "+pj.Version, peersDir
		}
	}
	return ps
}

// firstLine runs a version command and keeps the first non-empty line of
// what it printed (mawk prints to stderr, most to stdout).
func firstLine(ctx context.Context, bin string, args ...string) string {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, _ := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	for _, l := range bytes.Split(out, []byte{'\n'}) {
		if s := strings.TrimSpace(string(l)); s != "" {
			return strings.Join(strings.Fields(s), " ")
		}
	}
	return ""
}

// findGNUTime returns the path of GNU time, which measures peak RSS (see
// meter), or "" when there is none.
func findGNUTime(ctx context.Context) string {
	for _, p := range []string{"/usr/bin/time", "/bin/time"} {
		if strings.Contains(firstLine(ctx, p, "--version"), "GNU") {
			return p
		}
	}
	return ""
}

// FindPeersDir returns the first bench/.peers (or .peers, when run from
// bench/) that holds @duckdb/node-api, looking from dir upwards; "" if none.
func FindPeersDir(dir string) string {
	for {
		for _, c := range []string{filepath.Join(dir, "bench", ".peers"), filepath.Join(dir, ".peers")} {
			if _, err := os.Stat(filepath.Join(c, duckdbPackage)); err == nil {
				return c
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// installDuckScripts writes the embedded DuckDB scripts into dir/duckdb,
// beside a .peers link to peersDir, and returns that directory.
func installDuckScripts(dir, peersDir string) (string, error) {
	d := filepath.Join(dir, "duckdb")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	for _, name := range []string{"duckdb-peer.mjs", "duckdb-distinct.mjs", "duckdb-dedup.mjs", "duckdb-count.mjs", "duckdb-parquet.mjs"} {
		b, err := duckScripts.ReadFile(name)
		if err != nil {
			return "", err
		}
		if err := os.WriteFile(filepath.Join(d, name), b, 0o644); err != nil {
			return "", err
		}
	}
	abs, err := filepath.Abs(peersDir)
	if err != nil {
		return "", err
	}
	if err := os.Symlink(abs, filepath.Join(d, ".peers")); err != nil {
		return "", err
	}
	return d, nil
}
