// Package cmdtest checks a program's command line in its tests, through the
// run function its main calls: what -h lists, and a configuration refused.
// It imports nothing of the service, so that the demo receiver's test may
// use it too.
package cmdtest

import (
	"context"
	"errors"
	"flag"
	"io"
	"strings"
	"testing"

	"github.com/example/payments/tools/testio"
)

// Run is a program's run: its arguments without the program's name, and
// where it writes its output.
type Run func(ctx context.Context, args []string, stdout io.Writer) error

// Help runs the program with -h and fails t unless it returns flag.ErrHelp
// having listed every one of names (the environment variables it reads).
func Help(t testing.TB, run Run, names ...string) {
	t.Helper()
	var out strings.Builder
	if err := run(context.Background(), []string{"-h"}, &out); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: err = %v, want flag.ErrHelp", err)
	}
	for _, name := range names {
		if !strings.Contains(out.String(), name) {
			t.Errorf("-h does not list %s:\n%s", name, out.String())
		}
	}
}

// Refuses runs the program without arguments in the environment the test
// set, and fails t unless it returns an error that says want.
func Refuses(t testing.TB, run Run, want string) {
	t.Helper()
	out := &testio.Buffer{}
	if err := run(context.Background(), nil, out); err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want one saying %q\n%s", err, want, out.String())
	}
}
