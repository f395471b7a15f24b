package app

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"troupe/config"
)

func TestProblemsOfSplitsJoinedErrors(t *testing.T) {
	two := config.Errors{{Layer: "config file f", Line: 2, Key: "a", Problem: "unknown key"},
		{Layer: "config file f", Line: 5, Key: "b", Problem: "unknown key"}}
	for _, c := range []struct {
		err  error
		want []string
	}{
		{two, []string{"config file f:2: a: unknown key", "config file f:5: b: unknown key"}},
		{errors.Join(errors.New("one"), errors.Join(errors.New("two"), errors.New("three"))), []string{"one", "two", "three"}},
		{fmt.Errorf("not reloading: %w", errors.Join(errors.New("x"), errors.New("y"))), []string{"not reloading: x", "y"}},
		{errors.New("alone"), []string{"alone"}},
		{errors.New(""), []string{"no detail given"}},
	} {
		if got := problemsOf(c.err); !slices.Equal(got, c.want) {
			t.Errorf("problemsOf(%q) = %q, want %q", c.err, got, c.want)
		}
	}
}
