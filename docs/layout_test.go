package docs_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestLayoutNamesEveryPackage holds docs/LAYOUT.md to the tree: every
// folder that holds Go code is named in the first column of one of its
// tables, and every folder named there exists. A kind's package (one the
// catalog imports) is named by `internal/<kind>`, so that a fork's own
// kinds need no edit of LAYOUT.
func TestLayoutNamesEveryPackage(t *testing.T) {
	layout, err := os.ReadFile("LAYOUT.md")
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, row := range regexp.MustCompile("(?m)^\\| ([^|]+) \\|").FindAllStringSubmatch(string(layout), -1) {
		for _, m := range regexp.MustCompile("`([^`]+)`").FindAllStringSubmatch(row[1], -1) {
			named = append(named, strings.TrimSuffix(m[1], "/"))
		}
	}
	if len(named) == 0 {
		t.Fatal("docs/LAYOUT.md's tables name no path")
	}

	var packages []string
	for _, name := range gitFiles(t) {
		if dir := path.Dir(name); strings.HasSuffix(name, ".go") && !slices.Contains(packages, dir) {
			packages = append(packages, dir)
		}
	}
	kinds := kindPackages(t)
	for _, dir := range packages {
		if !slices.Contains(named, dir) && !(slices.Contains(named, "internal/<kind>") && slices.Contains(kinds, dir)) {
			t.Errorf("docs/LAYOUT.md does not name %s, which holds Go code", dir)
		}
	}
	for _, p := range named {
		if p == "internal/<kind>" {
			continue
		}
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			t.Errorf("docs/LAYOUT.md names %s: %v", p, err)
		}
	}
}

// kindPackages are the folders of the kinds' packages: those whose New the
// catalog calls to list its kinds.
func kindPackages(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../internal/catalog/catalog.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	called := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		if call, ok := n.(*ast.CallExpr); ok {
			if sel, ok := call.Fun.(*ast.SelectorExpr); ok && sel.Sel.Name == "New" {
				if pkg, ok := sel.X.(*ast.Ident); ok {
					called[pkg.Name] = true
				}
			}
		}
		return true
	})
	var dirs []string
	for _, imp := range f.Imports {
		dir, ok := strings.CutPrefix(strings.Trim(imp.Path.Value, `"`), "github.com/example/payments/")
		if ok && called[path.Base(dir)] {
			dirs = append(dirs, dir)
		}
	}
	if len(dirs) == 0 {
		t.Fatal("the catalog calls no kind's New")
	}
	return dirs
}
