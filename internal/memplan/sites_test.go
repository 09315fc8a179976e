package memplan

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// memArith is arithmetic on a memory budget (o.Mem/2, mem - 64<<20,
// max(c.o.Mem/2, …), ReplyBudget(o.Mem)): a share of --mem taken outside
// the plan.
var memArith = regexp.MustCompile(`\b(\w+\.)*(Mem|mem)\b\s*[-+*/%]|(^|[^-<])[-+*/%]\s*(\w+\.)*(Mem|mem)\b|\b(max|min|ReplyBudget|spoolMem)\([^)]*\b(\w+\.)*(Mem|mem)\b`)

// TestSharesFromPlan: no code but this package's computes a share of
// --mem; every allocation site takes its share from a Plan.
func TestSharesFromPlan(t *testing.T) {
	root := filepath.Join("..", "..")
	strs := regexp.MustCompile("\"(\\\\.|[^\"\\\\])*\"|`[^`]*`")
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", ".peers", ".git":
				return filepath.SkipDir
			}
			if path == filepath.Join(root, "internal", "memplan") || path == filepath.Join(root, "bench") || path == filepath.Join(root, "cmd", "fpdedup-bench") {
				return filepath.SkipDir // the plan; the benchmarks' own --mem sweeps
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(strs.ReplaceAllString(line, `""`), "//")
			if memArith.MatchString(code) {
				found = append(found, path+":"+strings.TrimSpace(line)+" (line "+itoa(i+1)+")")
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("a share of --mem computed outside internal/memplan: %s", f)
	}
}

func itoa(n int) string {
	s := ""
	for ; n > 0 || s == ""; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}
