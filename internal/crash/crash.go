// Package crash makes a process die abruptly at a named point, so that the
// crash tests can prove recovery from exactly there. It is off unless the
// CRASH_POINT variable names a point, and refused unless APP_ENV is "test".
package crash

import (
	"fmt"
	"os"
	"slices"
	"syscall"
)

// Hook returns the function that the code calls at each crash point: it
// kills the process with SIGKILL at the point named, and does nothing at the
// others. An empty point gives nil, the production setting.
func Hook(point, appEnv string, known ...string) (func(string), error) {
	if point == "" {
		return nil, nil
	}
	if appEnv != "test" {
		return nil, fmt.Errorf("CRASH_POINT=%s kills the process on purpose: it is refused unless APP_ENV=test", point)
	}
	if !slices.Contains(known, point) {
		return nil, fmt.Errorf("CRASH_POINT=%s is not one of %v", point, known)
	}
	return func(at string) {
		if at == point {
			// SIGKILL, not os.Exit: no deferred call, no flush, no goodbye.
			_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {} // the signal is on its way
		}
	}, nil
}
