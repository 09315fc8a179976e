// Package layering holds the tests of how fpdedup's packages stand to each
// other: that they import each other only downwards (README "Layout"), that
// the product never links the benchmark harness, and that the store is
// configured by its callers, not the environment (env_test.go).
package layering

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/fpdedup/fpdedup/"

// layers, lowest first: a package may import those of lower layers, and of
// its own layer only within internal/. The packages under reconcile/ are
// in reconcile's layer, and among themselves in its rooms.
var layers = [][]string{
	{"internal/"},
	{"schema"},
	{"fpstore"},
	{"ingest", "bench/gen"},
	// the offline jobs and the online comparison: neither needs the other
	{"pipeline", "reconcile", "reconcile/"},
	{"cmd/fpdedup"},
	{"bench"},
	{"cmd/fpdedup-bench"},
}

// reconcileRooms, lowest first (README "Layout"): a package of reconcile
// imports only those of lower rooms, never one of its own room: the
// stores' adapters do not import each other, the machinery beneath them
// imports no adapter, and only the facade, reconcile itself, imports the
// adapters. The rest of the module imports the facade alone.
var reconcileRooms = [][]string{
	{"reconcile/report"}, // the run's document
	{"reconcile/online"}, // the contract between the machinery and the adapters
	// the machinery's comparison, the Redis connections the Redis adapters
	// share, and the etcd store's client (scan, compare-and-create)
	{"reconcile/join", "reconcile/redisconn", "reconcile/etcdkv"},
	{"reconcile/apply"}, // writes what join found missing
	// the stores' adapters
	{"reconcile/rediskeys", "reconcile/bitmapbloom", "reconcile/redisbloom", "reconcile/mysqltable", "reconcile/exportfile", "reconcile/etcdkeys"},
	{"reconcile"}, // the facade: Options, Run, the URL
}

// onlyImportedBy: a package that only these may import (besides tests).
// The Redis connections are the Redis adapters' (and the facade names
// their types); the test support is for tests alone.
var onlyImportedBy = map[string][]string{
	"reconcile/redisconn":              {"reconcile/rediskeys", "reconcile/bitmapbloom", "reconcile/redisbloom", "reconcile"},
	"reconcile/internal/reconciletest": {},
}

// layerOf is the layer of a package path relative to the module; -1 for
// one that the list does not name.
func layerOf(pkg string) int {
	for i, l := range layers {
		for _, p := range l {
			if pkg == p || strings.HasSuffix(p, "/") && strings.HasPrefix(pkg, p) {
				return i
			}
		}
	}
	return -1
}

// roomOf is the room of a package of reconcile; -1 for one that the rooms
// do not name, or one outside reconcile.
func roomOf(pkg string) int {
	for i, r := range reconcileRooms {
		if slices.Contains(r, pkg) {
			return i
		}
	}
	return -1
}

func inReconcile(pkg string) bool { return pkg == "reconcile" || strings.HasPrefix(pkg, "reconcile/") }

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr // an import cycle, or an internal package imported from outside
		}
		t.Fatalf("go list: %v\n%s", err, stderr)
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Fields(line)
		pkg, ok := strings.CutPrefix(f[0], module)
		if !ok || pkg == "internal/layering" {
			continue
		}
		me := layerOf(pkg)
		if me < 0 {
			t.Errorf("%s is in no layer: add it to layers and to the README's Layout", pkg)
			continue
		}
		room := roomOf(pkg)
		if _, support := onlyImportedBy[pkg]; inReconcile(pkg) && room < 0 && !support {
			t.Errorf("%s is in no room of reconcile: add it to reconcileRooms and to the README's Layout", pkg)
			continue
		}
		for _, imp := range f[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			checked++
			if who, only := onlyImportedBy[dep]; only && !slices.Contains(who, pkg) {
				if len(who) == 0 {
					t.Errorf("%s imports %s, which only tests may import", pkg, dep)
				} else {
					t.Errorf("%s imports %s, which only %v may import", pkg, dep, who)
				}
			}
			switch l := layerOf(dep); {
			case l < 0:
				t.Errorf("%s imports %s, which is in no layer", pkg, dep)
			case inReconcile(pkg) && inReconcile(dep):
				if r := roomOf(dep); r >= room && room >= 0 {
					t.Errorf("%s imports %s: in reconcile a room imports only lower ones (README \"Layout\"): adapters not each other, the machinery no adapter", pkg, dep)
				}
			case inReconcile(dep) && dep != "reconcile":
				t.Errorf("%s imports %s: outside reconcile only its facade, reconcile, is imported", pkg, dep)
			case l > me, l == me && !strings.HasPrefix(pkg, "internal/"):
				t.Errorf("%s imports %s: a lower layer may not import a higher one (README \"Layout\")", pkg, dep)
			}
		}
	}
	if checked == 0 {
		t.Fatal("go list found no import between the module's packages")
	}
}
