package docs_test

import (
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
// tables, and every folder named there exists.
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
	for _, dir := range packages {
		if !slices.Contains(named, dir) {
			t.Errorf("docs/LAYOUT.md does not name %s, which holds Go code", dir)
		}
	}
	for _, p := range named {
		if _, err := os.Stat(filepath.Join("..", p)); err != nil {
			t.Errorf("docs/LAYOUT.md names %s: %v", p, err)
		}
	}
}
