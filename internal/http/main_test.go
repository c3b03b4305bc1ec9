package http_test

import (
	"testing"

	"go.uber.org/goleak"

	"github.com/example/payments/tools/stacktest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

const (
	acme   = stacktest.Acme
	globex = stacktest.Globex
)
