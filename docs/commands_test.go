package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// goTestRun is a `go test … -run NAMES … ./PACKAGE` command in the prose.
var goTestRun = regexp.MustCompile("`go test [^`]*?-run[= ]'?([^ '`]+)'?[^`]*? \\./([a-z0-9/_-]+?)/?`")

// TestDocumentedTestsExist: every test a document tells the reader to run
// (`go test -run 'TestA|TestB' ./pkg`) is a test of that package.
func TestDocumentedTestsExist(t *testing.T) {
	t.Parallel()
	found := 0
	for _, name := range gitFiles(t) {
		if !strings.HasSuffix(name, ".md") {
			continue
		}
		b, err := os.ReadFile(filepath.Join("..", name))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range goTestRun.FindAllStringSubmatch(string(b), -1) {
			found++
			tests := packageTests(t, m[2])
			for _, pattern := range strings.Split(m[1], "|") {
				top, _, _ := strings.Cut(pattern, "/") // a subtest's test
				re, err := regexp.Compile(top)
				if err != nil {
					t.Errorf("%s: %s: %v", name, m[0], err)
					continue
				}
				if !re.MatchString("") && !slices.ContainsFunc(tests, re.MatchString) { // "^$" runs none
					t.Errorf("%s: %s: no test of ./%s matches %s", name, m[0], m[2], top)
				}
			}
		}
	}
	if found == 0 {
		t.Fatal("no `go test -run` command found in the documents")
	}
}

// packageTests returns the names of the test, fuzz and benchmark functions
// in the package folder dir.
func packageTests(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", dir, "*_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	var tests []string
	decl := regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w*)\(`)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range decl.FindAllStringSubmatch(string(b), -1) {
			tests = append(tests, m[1])
		}
	}
	return tests
}
