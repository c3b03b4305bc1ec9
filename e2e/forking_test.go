package e2e

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/example/payments/internal/catalog"
)

// patch is the worked example of docs/FORKING.md: a third operation,
// payouts, added in its own files and a few lines of existing ones.
const patch = "../docs/payouts.patch"

// maxEdited is how many existing files other than tests the example may
// edit: the list of operations, the routes, the API document and the fake
// processor's routes.
const maxEdited = 4

// templateKinds are the kinds of the template the example was written for.
// A tree that declares others is a fork, whose own operations edit the same
// lines the example does.
var templateKinds = []string{"payment", "refund"}

// templateProcessors are the processors of the template the example was
// written for. The example adds payouts' calls to each of their adapters,
// which every adapter must make: a tree with another adapter is a fork
// the example does not build in until that adapter makes them too.
var templateProcessors = []string{"fake", "stripe"}

// processorNames are the names of the tree's processors, in their list's
// order.
func processorNames() []string {
	var names []string
	for _, a := range catalog.Processors {
		names = append(names, a.Name)
	}
	return names
}

// nestedRun marks the patched copy's own run of the suite, in which the
// forking tests do not run again.
const nestedRun = "PAYMENTS_FORKING_COPY"

// TestForkingGuidePatch applies the guide's worked example to a copy of the
// tree, builds it, and runs there, whole, every package the patch touches,
// and the docs' tests: when the code moves on and the example no longer
// applies or passes, this fails, so the guide cannot go stale. In a fork
// (a tree that declares other kinds than the template's) the example edits
// lines the fork's own operations have changed: when it no longer applies
// there, the test says so and skips, for the forker to retire it (FORKING,
// "Your own operations").
func TestForkingGuidePatch(t *testing.T) {
	t.Parallel()
	switch {
	case usePooler:
		t.Skip("the patched copy's suite runs once, in the run without the pooler")
	case os.Getenv(nestedRun) != "":
		t.Skip("this is the patched copy's own run")
	}
	if processors := processorNames(); !slices.Equal(processors, templateProcessors) {
		t.Skipf("this tree's processors are %v, not the template's %v: docs/payouts.patch no longer applies to it, "+
			"as it adds payouts' calls to the template's adapters only; give your adapters payout calls as the patch gives "+
			"the template's, or delete docs/payouts.patch and this test (FORKING, \"Your own operations\")", processors, templateProcessors)
	}
	text, err := os.ReadFile(patch)
	if err != nil {
		t.Fatal(err)
	}
	tree := copyTree(t, "..")
	inTree(t, tree, "git", "init", "-q") // the docs' tests list the files git knows of
	check := exec.Command("git", "apply", "--check", abs(t, patch))
	check.Dir = tree
	if out, err := check.CombinedOutput(); err != nil {
		if kinds := catalog.Kinds(nil).Types(); !slices.Equal(kinds, templateKinds) {
			t.Skipf("this tree declares %v, not the template's %v, and docs/payouts.patch no longer applies to it: "+
				"the worked example is the template's; delete docs/payouts.patch and this test (FORKING, \"Your own operations\")\n%s",
				kinds, templateKinds, out)
		}
		t.Fatalf("docs/payouts.patch no longer applies to the template: regenerate it as FORKING says (\"Your own operations\")\n%s", out)
	}
	if edited := editedFiles(t, text); len(edited) > maxEdited {
		t.Errorf("the example edits %d existing files besides tests, more than %d: %v", len(edited), maxEdited, edited)
	}

	stat := exec.Command("git", "apply", "--stat", abs(t, patch))
	stat.Dir = ".." // in a subfolder, git apply leaves out the paths outside it
	out, err := stat.Output()
	if err != nil {
		t.Fatalf("git apply --stat: %v", err)
	}
	guide, err := os.ReadFile("../docs/FORKING.md")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := statCounts(string(guide)), statCounts(string(out)); !maps.Equal(got, want) {
		t.Errorf("docs/FORKING.md's --stat of the patch says %v, git apply --stat says %v", got, want)
	}

	inTree(t, tree, "git", "apply", abs(t, patch))
	inTree(t, tree, "go", "build", "-race", "./...")
	// One package at a time (-p 1): the outer run's go on beside these, each
	// starting stacks of its own on the one Postgres. TestFailover, which
	// the patch cannot change and the outer run runs, is left out: a second
	// Patroni cluster beside the outer run's starves both on two cores.
	inTree(t, tree, "go", append([]string{"test", "-race", "-count=1", "-p", "1", "-skip", "^TestFailover$", "-timeout", "20m"},
		touchedPackages(t, tree, text)...)...)

	// The patched copy is a fork with an operation of its own: there, this
	// test finds the example no longer applies, says so and skips.
	out = runInTree(t, tree, false, "go", "test", "-race", "-count=1", "-v", "-run", "TestForkingGuidePatch$", "./e2e/")
	if !bytes.Contains(out, []byte("--- SKIP: TestForkingGuidePatch")) || !bytes.Contains(out, []byte("docs/payouts.patch no longer applies")) {
		t.Errorf("in a fork, TestForkingGuidePatch does not skip saying the example no longer applies:\n%s", out)
	}
}

// touchedPackages are the packages of tree, once patched, that hold a file
// the patch adds or changes, and the docs' tests (which hold LAYOUT to the
// tree): the example's tests, and every test that reads what it changed.
func touchedPackages(t *testing.T, tree string, text []byte) []string {
	t.Helper()
	pkgs := []string{"./docs/"}
	for _, m := range regexp.MustCompile(`(?m)^\+\+\+ b/(.+)$`).FindAllSubmatch(text, -1) {
		dir := filepath.Dir(string(m[1]))
		if sources, _ := filepath.Glob(filepath.Join(tree, dir, "*.go")); len(sources) == 0 {
			continue
		}
		if pkg := "./" + dir + "/"; !slices.Contains(pkgs, pkg) {
			pkgs = append(pkgs, pkg)
		}
	}
	return pkgs
}

// statCounts reads the lines of a --stat in text: each file's count of
// changed lines.
func statCounts(text string) map[string]string {
	counts := map[string]string{}
	for _, m := range regexp.MustCompile(`(?m)^ (\S+) +\| +(\d+)`).FindAllStringSubmatch(text, -1) {
		counts[m[1]] = m[2]
	}
	return counts
}

// editedFiles lists the existing files a patch changes, tests aside: those
// it neither creates nor deletes.
func editedFiles(t *testing.T, text []byte) []string {
	t.Helper()
	var edited []string
	var from string
	sc := bufio.NewScanner(bytes.NewReader(text))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "--- "):
			from = strings.TrimPrefix(line, "--- ")
		case strings.HasPrefix(line, "+++ ") && from != "/dev/null" && strings.TrimPrefix(line, "+++ ") != "/dev/null" &&
			!strings.HasSuffix(line, "_test.go"):
			edited = append(edited, strings.TrimPrefix(strings.TrimPrefix(line, "+++ "), "b/"))
		}
	}
	if len(edited) == 0 {
		t.Fatal("the patch edits no existing file: is it a patch?")
	}
	return edited
}

// copyTree copies the files git knows of in root (committed or not, but not
// ignored) to a new directory, and returns it.
func copyTree(t *testing.T, root string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range trackedFiles(t, root) {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatal(err)
		}
		if !info.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		dst := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(dst, b, info.Mode().Perm()); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// trackedFiles lists the files git knows of in root, committed or not, but
// not ignored, and not deleted in the working tree.
func trackedFiles(t *testing.T, root string) []string {
	t.Helper()
	list := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	var files []string
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		if _, err := os.Lstat(filepath.Join(root, name)); err == nil {
			files = append(files, name)
		}
	}
	return files
}

// inTree runs a command in dir and fails the test with its output when it
// fails. Paths are trimmed from what the copy compiles (as `make test` trims
// them from what it compiles), so that the copy's builds share the build
// cache with this run's and with each other, wherever the copy is: only the
// packages the patch changes, and what imports them, are compiled again.
func inTree(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	runInTree(t, dir, true, name, args...)
}

// runInTree runs a command in dir, as inTree does, and returns its output;
// nested marks a run of the suite as the copy's own (nestedRun).
func runInTree(t *testing.T, dir string, nested bool, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	goflags := os.Getenv("GOFLAGS")
	if !slices.Contains(strings.Fields(goflags), "-trimpath") {
		goflags += " -trimpath"
	}
	cmd.Env = append(os.Environ(), "GOFLAGS="+goflags)
	if nested {
		cmd.Env = append(cmd.Env, nestedRun+"=1")
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s:\n%s", name, strings.Join(args, " "), out)
	return out
}

func abs(t *testing.T, path string) string {
	t.Helper()
	p, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// standIns are the stand-ins docs/FORKING.md (Part 3) tells a forker how to
// delete: the heading of each one's section, and its folders.
var standIns = []struct {
	heading string
	name    string
	dirs    []string
}{
	{"### The fake processor", "fakeprocessor", []string{"tools/fakeprocessor", "tools/cmd/fakeprocessor"}},
	{"### The demo receiver", "demoreceiver", []string{"tools/demoreceiver", "tools/cmd/demoreceiver"}},
}

// TestForkingGuideDelete holds the guide's "what to delete" to the tree:
// every file outside a stand-in that names its packages or its binary is in
// the stand-in's list, every listed file does, and the service builds in a
// copy of the tree from which both stand-ins are deleted.
func TestForkingGuideDelete(t *testing.T) {
	t.Parallel()
	if usePooler {
		t.Skip("the copy is built once, in the run without the pooler")
	}
	guide, err := os.ReadFile("../docs/FORKING.md")
	if err != nil {
		t.Fatal(err)
	}
	files := trackedFiles(t, "..")
	for _, s := range standIns {
		listed := listedFiles(t, string(guide), s.heading)
		uses := regexp.MustCompile(`tools/(cmd/)?` + s.name + `\b|bin/` + s.name + `\b`)
		var using []string
		for _, name := range files {
			if strings.HasSuffix(name, ".md") || strings.HasSuffix(name, ".patch") || name == "e2e/forking_test.go" || inDirs(name, s.dirs) {
				continue
			}
			if uses.MatchString(usedText(t, name)) {
				using = append(using, name)
			}
		}
		for _, name := range using {
			if !slices.Contains(listed, name) {
				t.Errorf("%s names %s, and docs/FORKING.md's %q does not list it", name, s.name, s.heading)
			}
		}
		for _, name := range listed {
			if !slices.Contains(using, name) {
				t.Errorf("docs/FORKING.md's %q lists %s, which does not name %s", s.heading, name, s.name)
			}
		}
	}

	tree := copyTree(t, "..")
	for _, s := range standIns {
		for _, dir := range s.dirs {
			if err := os.RemoveAll(filepath.Join(tree, dir)); err != nil {
				t.Fatal(err)
			}
		}
	}
	inTree(t, tree, "go", "build", "./cmd/...", "./internal/...", "./migrations/...", "./client/...")
}

// usedText is what of the file can use a stand-in: a Go file's string
// literals (its import paths, the packages it builds), not its comments;
// any other file whole.
func usedText(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", name))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(name, ".go") {
		return string(b)
	}
	f, err := parser.ParseFile(token.NewFileSet(), name, b, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var literals strings.Builder
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			literals.WriteString(lit.Value + "\n")
		}
		return true
	})
	return literals.String()
}

// listedFiles returns the files in the first column of the table under the
// guide's heading.
func listedFiles(t *testing.T, guide, heading string) []string {
	t.Helper()
	_, section, ok := strings.Cut(guide, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("docs/FORKING.md has no %q", heading)
	}
	if end := strings.Index(section, "\n#"); end >= 0 {
		section = section[:end]
	}
	var files []string
	for _, m := range regexp.MustCompile("(?m)^\\| `([^`]+)` \\|").FindAllStringSubmatch(section, -1) {
		files = append(files, m[1])
	}
	if len(files) == 0 {
		t.Fatalf("docs/FORKING.md's %q lists no file", heading)
	}
	return files
}

// inDirs reports whether the file name is inside one of dirs.
func inDirs(name string, dirs []string) bool {
	for _, dir := range dirs {
		if strings.HasPrefix(name, dir+"/") {
			return true
		}
	}
	return false
}
