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

func TestArm(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, point, env, err string
	}{
		{"OffByDefault", "", "production", ""},
		{"OffInTest", "", "test", ""},
		{"Armed", "after_x", "test", ""},
		{"ErrOutsideTest", "after_x", "production", "refused unless APP_ENV=test"},
		{"ErrDevelopment", "after_x", "development", "refused unless APP_ENV=test"},
		{"ErrUnknownPoint", "after_typo", "test", "is not one of"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := crash.Arm(tc.point, tc.env, "after_x", "after_y")
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// Another point, or none armed: At must return, not kill the
			// test binary. (Reaching an armed point is the e2e crash tests'.)
			crash.At("after_y")
		})
	}
}
