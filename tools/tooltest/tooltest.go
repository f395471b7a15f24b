// Package tooltest holds checks the tests of tool packages share.
package tooltest

import (
	"testing"

	"troupe/tools"
)

// WantError requires err to be a *tools.Error of the given kind and returns
// it, so a test can go on to check the message.
func WantError(t testing.TB, err error, kind tools.Kind) *tools.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want %s", kind)
	}
	te, ok := tools.AsError(err)
	if !ok {
		t.Fatalf("got plain error %v, want a %s *tools.Error", err, kind)
	}
	if te.Kind != kind {
		t.Fatalf("got %s (%s), want %s", te.Kind, te.Message, kind)
	}
	return te
}
