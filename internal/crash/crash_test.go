package crash_test

import (
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/example/payments/internal/crash"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestHook(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, point, env, err string
		armed                 bool
	}{
		{"OffByDefault", "", "production", "", false},
		{"OffInTest", "", "test", "", false},
		{"Armed", "after_x", "test", "", true},
		{"ErrOutsideTest", "after_x", "production", "refused unless APP_ENV=test", false},
		{"ErrDevelopment", "after_x", "development", "refused unless APP_ENV=test", false},
		{"ErrUnknownPoint", "after_typo", "test", "is not one of", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hook, err := crash.Hook(tc.point, tc.env, "after_x", "after_y")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || (hook != nil) != tc.armed {
				t.Fatalf("hook armed = %v, err = %v", hook != nil, err)
			}
			if hook != nil {
				hook("after_y") // another point: must return, not kill the test binary
			}
		})
	}
}
