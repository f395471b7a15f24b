package limits

import "testing"

func TestSwitchPassesToTheStoreSetLast(t *testing.T) {
	first, second := NewLocal(), NewLocal()
	w := NewSwitch(first)
	if ok, _ := w.Take("k", 1); !ok {
		t.Fatal("the first take of 1 was refused")
	}
	if ok, _ := w.Take("k", 1); ok {
		t.Fatal("the second take of 1 was allowed: the Switch does not pass to its store")
	}
	w.Set(second)
	if ok, _ := w.Take("k", 1); !ok {
		t.Fatal("the Switch still passes to the store it had before Set")
	}
	if !w.Acquire("s", 1) || w.Acquire("s", 1) {
		t.Fatal("max 1 slot: want one")
	}
	w.Release("s")
	if !second.Acquire("s", 1) {
		t.Fatal("the Switch's release did not reach its store")
	}
}
