package docs_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package if any test leaves a goroutine behind: every
// call must close its connections before it returns.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
