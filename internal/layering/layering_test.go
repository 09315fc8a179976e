// Package layering holds one test: that fpdedup's packages import each
// other only downwards (README "Layout"), and that the product never links
// the benchmark harness.
package layering

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/fpdedup/fpdedup/"

// layers, lowest first: a package may import those of lower layers, and of
// its own layer only within internal/.
var layers = [][]string{
	{"internal/"},
	{"schema"},
	{"fpstore"},
	{"ingest", "bench/gen"},
	// the offline jobs and the online comparison: neither needs the other
	{"pipeline", "reconcile"},
	{"cmd/fpdedup"},
	{"bench"},
	{"cmd/fpdedup-bench"},
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

func TestLayering(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
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
		for _, imp := range f[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			checked++
			switch l := layerOf(dep); {
			case l < 0:
				t.Errorf("%s imports %s, which is in no layer", pkg, dep)
			case l > me, l == me && !strings.HasPrefix(pkg, "internal/"):
				t.Errorf("%s imports %s: a lower layer may not import a higher one (README \"Layout\")", pkg, dep)
			}
		}
	}
	if checked == 0 {
		t.Fatal("go list found no import between the module's packages")
	}
}
