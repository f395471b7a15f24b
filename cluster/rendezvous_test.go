package cluster

import (
	"fmt"
	"slices"
	"testing"
)

func TestKeyOwnerIsTheSameForTheSameMembers(t *testing.T) {
	members := []string{"a1", "b2", "c3"}
	shuffled := []string{"c3", "a1", "b2"}
	for i := range 200 {
		key := fmt.Sprintf("token:t%d\x00rate", i)
		o := keyOwner(key, members)
		if !slices.Contains(members, o) {
			t.Fatalf("owner %q of %q is not a member", o, key)
		}
		if o2 := keyOwner(key, shuffled); o2 != o {
			t.Fatalf("owner of %q depends on the members' order: %q vs %q", key, o, o2)
		}
	}
	if o := keyOwner("k", nil); o != "" {
		t.Fatalf("owner with no members = %q", o)
	}
}

func TestKeyOwnerSpreadsKeys(t *testing.T) {
	members := []string{"a1", "b2", "c3", "d4"}
	count := map[string]int{}
	const keys = 4000
	for i := range keys {
		count[keyOwner(fmt.Sprintf("oauth:https://issuer\x00user%d\x00rate", i), members)]++
	}
	for _, m := range members {
		// A fair share is 1000: a bad hash gives one member most keys.
		if count[m] < 800 || count[m] > 1200 {
			t.Fatalf("member %s owns %d of %d keys: %v", m, count[m], keys, count)
		}
	}
}

// When a member leaves, only the keys it owned move; when one joins, only
// the keys it now owns move (to it).
func TestKeyOwnerMovesOnlyTheKeysOfAMemberThatLeft(t *testing.T) {
	before := []string{"a1", "b2", "c3"}
	after := []string{"a1", "c3"} // b2 left
	moved := 0
	for i := range 1000 {
		key := fmt.Sprintf("token:t%d\x00calls", i)
		was, is := keyOwner(key, before), keyOwner(key, after)
		if was != "b2" && was != is {
			t.Fatalf("key %q moved from %s to %s although %s stayed", key, was, is, was)
		}
		if was == "b2" {
			moved++
		}
	}
	if moved == 0 {
		t.Fatal("b2 owned no key: the test proves nothing")
	}
	joined := []string{"a1", "b2", "c3", "d4"}
	for i := range 1000 {
		key := fmt.Sprintf("token:t%d\x00calls", i)
		was, is := keyOwner(key, before), keyOwner(key, joined)
		if is != "d4" && was != is {
			t.Fatalf("key %q moved from %s to %s when d4 joined", key, was, is)
		}
	}
}
