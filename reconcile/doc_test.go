package reconcile

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDocNamesPackages: the package's map names every package beneath it
// and both bloom modes.
func TestDocNamesPackages(t *testing.T) {
	b, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	words := map[string]bool{}
	for _, w := range regexp.MustCompile(`[\w/]+`).FindAllString(doc, -1) {
		words[w] = true
	}
	err = filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || path == "." {
			return err
		}
		if d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if gos, _ := filepath.Glob(filepath.Join(path, "*.go")); len(gos) > 0 && !words[filepath.ToSlash(path)] && !words[d.Name()] {
			t.Errorf("doc.go does not name the package %s", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"bitmap bloom", "RedisBloom"} {
		if !strings.Contains(strings.Join(strings.Fields(doc), " "), mode) {
			t.Errorf("doc.go does not name the bloom mode %q", mode)
		}
	}
}
