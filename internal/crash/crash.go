// Package crash makes a process die abruptly at a named point, so that the
// crash tests can prove recovery from exactly there. It is off unless the
// CRASH_POINT variable names a point, and refused unless APP_ENV is "test".
// The code marks its points with At; a process arms one with Arm when it is
// built, so that no production type carries a hook.
package crash

import (
	"fmt"
	"os"
	"slices"
	"sync/atomic"
	"syscall"
)

// armed is the point where this process dies; empty (production): none.
var armed atomic.Pointer[string]

// Arm makes the process die with SIGKILL when it reaches point. An empty
// point arms nothing. It is refused unless appEnv is "test", and for a point
// not in known, the points of the process being built.
func Arm(point, appEnv string, known ...string) error {
	if point == "" {
		return nil
	}
	if appEnv != "test" {
		return fmt.Errorf("CRASH_POINT=%s kills the process on purpose: it is refused unless APP_ENV=test", point)
	}
	if !slices.Contains(known, point) {
		return fmt.Errorf("CRASH_POINT=%s is not one of %v", point, known)
	}
	armed.Store(&point)
	return nil
}

// At kills the process when point is the one armed; anywhere else, and
// whenever nothing is armed, it returns at once.
func At(point string) {
	if p := armed.Load(); p != nil && *p == point {
		// SIGKILL, not os.Exit: no deferred call, no flush, no goodbye.
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
}
