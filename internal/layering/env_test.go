package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStoreReadsNoEnvironment: the index store and the device rates are
// configured by their callers (fpstore.Open's options), never through the
// environment: no os.Getenv, os.LookupEnv or os.Setenv in their code. On
// 9cdcd90 devrate read FPDEDUP_DEVICE, which the command set with
// os.Setenv to reach fpstore.
func TestStoreReadsNoEnvironment(t *testing.T) {
	for _, dir := range []string{"fpstore", "internal/devrate"} {
		files, err := filepath.Glob(filepath.Join("..", "..", dir, "*.go"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s: no Go files (%v)", dir, err)
		}
		for _, path := range files {
			if strings.HasSuffix(path, "_test.go") {
				continue
			}
			src, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, src, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == "os" {
					switch sel.Sel.Name {
					case "Getenv", "LookupEnv", "Setenv", "Environ":
						t.Errorf("%s: os.%s: a store is configured by its caller, not the environment", fset.Position(sel.Pos()), sel.Sel.Name)
					}
				}
				return true
			})
		}
	}
}
