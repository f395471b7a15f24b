package cluster

import "testing"

func TestOwnedLimitsCountSlotsOfEveryHolderAndDropAHolderThatLeft(t *testing.T) {
	o := newOwnedLimits()
	const key = "token:ci\x00calls"
	if !o.acquire(key, 3, "a", 1) || !o.acquire(key, 3, "b", 1) || !o.acquire(key, 3, "b", 2) {
		t.Fatal("three slots of three were refused")
	}
	if o.acquire(key, 3, "a", 2) {
		t.Fatal("a fourth slot of three was given")
	}
	if !o.acquire(key, 3, "a", 1) {
		t.Fatal("a slot already held was refused to its holder")
	}
	o.release(key, "a", 1)
	o.release(key, "a", 1) // released twice: nothing more to give back
	o.release(key, "a", 7) // never taken (an acquire that timed out)
	if got := o.held(key); got != 2 {
		t.Fatalf("held after a's release = %d, want 2 (b's)", got)
	}
	o.drop("b") // b left the cluster: its slots go with it
	if got := o.held(key); got != 0 {
		t.Fatalf("held after b left = %d, want 0", got)
	}
	for n := range uint64(3) {
		if !o.acquire(key, 3, "a", 10+n) {
			t.Fatal("the slots b held were not given back when it left")
		}
	}
	if !o.acquire("other", 0, "a", 1) {
		t.Fatal("max 0 (no limit) refused")
	}
}

func TestOwnedLimitsTakeFromOneBucketPerKey(t *testing.T) {
	o := newOwnedLimits()
	for i := range 2 {
		if ok, _ := o.take("k", 2); !ok {
			t.Fatalf("take %d of 2 refused", i+1)
		}
	}
	ok, wait := o.take("k", 2)
	if ok || wait <= 0 {
		t.Fatalf("third take of 2 = %v, %v; want refused with a wait", ok, wait)
	}
	if ok, _ := o.take("other", 2); !ok {
		t.Fatal("another key's bucket was emptied")
	}
}
