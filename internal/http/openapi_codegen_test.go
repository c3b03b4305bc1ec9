package http_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	// The runtime the generated client imports. Importing it here keeps it,
	// and the modules it needs, in go.mod and go.sum, so the client compiles
	// offline after go mod download.
	_ "github.com/oapi-codegen/runtime"
)

// codegenConfig is the oapi-codegen configuration a Go client of the API
// would use: the types and the client, in a package of their own.
const codegenConfig = `package: apiclient
generate:
  models: true
  client: true
output: apiclient/client.gen.go
`

// TestOpenAPICodegen checks that oapi-codegen, at the version go.mod names
// as a tool, generates a Go client from the served document, and that the
// client compiles. It works in a temporary module with the repository's
// go.mod and go.sum, so the generator and the client's runtime are the
// versions pinned there and nothing is written to the repository.
func TestOpenAPICodegen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	gomod := strings.TrimSpace(goCommand(t, ".", "env", "GOMOD"))
	if gomod == "" || gomod == os.DevNull {
		t.Fatalf("go env GOMOD = %q: not in a module", gomod)
	}
	for _, name := range []string{"go.mod", "go.sum"} {
		copyFile(t, filepath.Join(filepath.Dir(gomod), name), filepath.Join(dir, name))
	}
	writeFile(t, filepath.Join(dir, "openapi.yaml"), servedYAML(t))
	writeFile(t, filepath.Join(dir, "oapi-codegen.yaml"), []byte(codegenConfig))
	if err := os.Mkdir(filepath.Join(dir, "apiclient"), 0o755); err != nil {
		t.Fatal(err)
	}

	goCommand(t, dir, "tool", "oapi-codegen", "-config", "oapi-codegen.yaml", "openapi.yaml")
	goCommand(t, dir, "build", "./apiclient")
}

// goCommand runs the go command in dir and returns its output; it fails the
// test with that output if the command fails.
func goCommand(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("go", args...)
	cmd.Dir = dir
	// A workspace named in the environment would not include the temporary
	// module.
	cmd.Env = append(os.Environ(), "GOWORK=off")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, to, b)
}

func writeFile(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(name, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
