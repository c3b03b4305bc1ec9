package e2e

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// patch is the worked example of docs/FORKING.md: a third operation,
// payouts, added in its own files and a few lines of existing ones.
const patch = "../docs/payouts.patch"

// maxEdited is how many existing files the example may edit: the list of
// operations, the routes, the API document, the fake processor's routes,
// and one more at most.
const maxEdited = 5

// TestForkingGuidePatch applies the guide's worked example to a copy of the
// tree, builds it, and runs the payout's tests there (a first phase and its
// replay, a worker settle, a crash between phases resumed, an unknown outcome
// reconciled, a processor webhook settling it, a merchant event delivered),
// with the registry's and the API document's: when the code moves on and
// the example no longer applies or passes, this fails, so the guide cannot
// go stale.
func TestForkingGuidePatch(t *testing.T) {
	t.Parallel()
	text, err := os.ReadFile(patch)
	if err != nil {
		t.Fatal(err)
	}
	edited := editedFiles(t, text)
	if len(edited) > maxEdited {
		t.Errorf("the example edits %d existing files, more than %d: %v", len(edited), maxEdited, edited)
	}

	tree := copyTree(t, "..")
	inTree(t, tree, "git", "apply", "--check", "--verbose", abs(t, patch))
	inTree(t, tree, "git", "apply", abs(t, patch))
	inTree(t, tree, "go", "build", "./...")
	inTree(t, tree, "go", "test", "-race", "-count=1",
		"-run", "TestPayouts|TestPayoutCrashBetweenPhases|TestKinds|TestOpenAPI",
		"./internal/payouts/", "./internal/operations/", "./internal/http/", "./e2e/")
}

// editedFiles lists the existing files a patch changes: those it neither
// creates nor deletes.
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
		case strings.HasPrefix(line, "+++ ") && from != "/dev/null" && strings.TrimPrefix(line, "+++ ") != "/dev/null":
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
	list := exec.Command("git", "ls-files", "--cached", "--others", "--exclude-standard", "-z")
	list.Dir = root
	out, err := list.Output()
	if err != nil {
		t.Fatalf("git ls-files: %v", err)
	}
	dir := t.TempDir()
	for _, name := range strings.Split(strings.TrimRight(string(out), "\x00"), "\x00") {
		src := filepath.Join(root, name)
		info, err := os.Lstat(src)
		if os.IsNotExist(err) {
			continue // deleted in the working tree
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

// inTree runs a command in dir and fails the test with its output when it
// fails. Paths are trimmed from what the copy compiles, so that its builds
// share the build cache across runs, wherever the copy is.
func inTree(t *testing.T, dir, name string, args ...string) {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOFLAGS=-trimpath")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	t.Logf("%s %s:\n%s", name, strings.Join(args, " "), out)
}

func abs(t *testing.T, path string) string {
	t.Helper()
	p, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
