package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/example/payments/tools/testio"
	"github.com/example/payments/tools/testwait"
)

// TestRunScriptStartsTheStandInOnlyForIt: scripts/run.sh, which make run
// runs, starts the stand-in processor with PROCESSOR=fake (the default) and
// not with another processor, whose webhooks the stand-in could never sign.
// The script runs for real, in a copy of the tree's layout whose bin/ holds
// programs that only say they started, so that what it starts is all that
// is measured.
func TestRunScriptStartsTheStandInOnlyForIt(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../scripts/run.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name, processor string
		standIn         bool
	}{
		{"Default", "", true},
		{"Fake", "fake", true},
		{"Stripe", "stripe", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			for _, d := range []string{"scripts", "bin"} {
				if err := os.Mkdir(filepath.Join(dir, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(dir, "scripts", "run.sh"), script, 0o755); err != nil {
				t.Fatal(err)
			}
			programs := []string{"fakeprocessor", "worker", "api", "demoreceiver"}
			for _, p := range programs {
				stub := "#!/bin/sh\necho \"started with PROCESSOR=$PROCESSOR\"\nexec sleep 300\n"
				if err := os.WriteFile(filepath.Join(dir, "bin", p), []byte(stub), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("bash", filepath.Join(dir, "scripts", "run.sh"))
			// An empty PROCESSOR is the default, as an unset one.
			cmd.Env = append(os.Environ(), "PROCESSOR="+c.processor)
			out := &testio.Buffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill() })
			want := []string{"[worker] started", "[api] started", "[demoreceiver] started", "[run] processor"}
			if c.standIn {
				want = append(want, "[fakeprocessor] started with PROCESSOR=fake")
			}
			testwait.For(t, "scripts/run.sh starting its programs", func() bool {
				for _, w := range want {
					if !strings.Contains(out.String(), w) {
						return false
					}
				}
				return true
			})
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			_ = cmd.Wait()
			if got := strings.Contains(out.String(), "[fakeprocessor]"); got != c.standIn {
				t.Fatalf("PROCESSOR=%q: the stand-in processor started %t, want %t\n%s", c.processor, got, c.standIn, out.String())
			}
		})
	}
}
