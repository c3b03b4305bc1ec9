package demoreceiver_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// self is this module's path.
const self = "github.com/example/payments/"

// copyable are the packages a merchant copies: they may import each other,
// and nothing else of this module.
var copyable = []string{self + "tools/demoreceiver", self + "tools/cmd/demoreceiver"}

// TestImports: the receiver and its program import nothing of this module
// but each other (internal/ least of all), directly or not, so that a
// merchant can lift them out into a module of their own. Tests may use the
// module's helpers: only the programs' own dependencies are listed.
func TestImports(t *testing.T) {
	t.Parallel()
	out, err := exec.Command("go", append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, copyable...)...).Output()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, stderr(err))
	}
	seen := 0
	for dep := range strings.FieldsSeq(string(out)) {
		seen++
		if !strings.HasPrefix(dep, self) {
			continue
		}
		if !slices.Contains(copyable, dep) {
			t.Errorf("%s depends on %s: a merchant could not copy it out of this module", strings.Join(copyable, " or "), dep)
		}
	}
	if seen < len(copyable) {
		t.Fatalf("go list listed %d packages:\n%s", seen, out)
	}
}

// stderr is what a failed command wrote to its standard error.
func stderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}
