package cluster

import "testing"

func TestOwnedLimitsCountSlotsOfEveryHolderAndDropAHolderThatLeft(t *testing.T) {
	o := newOwnedLimits()
	const key = "token:ci\x00calls"
	if !o.acquire(key, 3, "a") || !o.acquire(key, 3, "b") || !o.acquire(key, 3, "b") {
		t.Fatal("three slots of three were refused")
	}
	if o.acquire(key, 3, "a") {
		t.Fatal("a fourth slot of three was given")
	}
	o.release(key, "a")
	o.release(key, "a") // a holds none now: nothing to give back
	if got := o.held(key); got != 2 {
		t.Fatalf("held after a's release = %d, want 2 (b's)", got)
	}
	o.drop("b") // b left the cluster: its slots go with it
	if got := o.held(key); got != 0 {
		t.Fatalf("held after b left = %d, want 0", got)
	}
	for range 3 {
		if !o.acquire(key, 3, "a") {
			t.Fatal("the slots b held were not given back when it left")
		}
	}
	if !o.acquire("other", 0, "a") {
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
