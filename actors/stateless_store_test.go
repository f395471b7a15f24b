package actors

import (
	"os"
	"testing"
	"time"

	"troupe/spool"
)

// writeOutput spools a few bytes into st and closes the output, so its
// store has a directory on disk.
func writeOutput(t *testing.T, st *spool.Store, id string) string {
	t.Helper()
	out, err := st.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := out.Stdout.Write([]byte("some output\n")); err != nil {
		t.Fatal(err)
	}
	out.Close()
	return out.Stdout.URI()
}

// setIdle changes the idle timeout (the sweep's timer may be reading it).
func setIdle(c *callerStores, d time.Duration) {
	c.mu.Lock()
	c.idle = d
	c.mu.Unlock()
}

func dirEntries(t *testing.T, dir string) int {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return len(entries)
}

// A caller's store is shared by its users, kept while one holds it however
// long that is, swept once nobody has for the idle timeout, and gone at
// close; another caller has none, and a read makes none.
func TestCallerStoresLifecycle(t *testing.T) {
	dir, budget := t.TempDir(), spool.NewBudget(0)
	c := newCallerStores(dir, spool.Limits{Shared: budget}, time.Hour, testLogger(t))
	defer c.close()
	alice, bob := [32]byte{1}, [32]byte{2}

	if c.acquire(alice, false) != nil {
		t.Fatal("a read made a store")
	}
	st := c.acquire(alice, true)
	uri := writeOutput(t, st, "c-1")
	if again := c.acquire(alice, false); again != st {
		t.Fatal("a second user of the same caller got another store")
	}
	if c.acquire(bob, false) != nil {
		t.Fatal("another caller got a store")
	}
	if budget.Used() == 0 || dirEntries(t, dir) != 1 {
		t.Fatalf("the store is not charged to the server's budget: %d bytes, %d dirs", budget.Used(), dirEntries(t, dir))
	}

	// Expired by the clock but still held: kept.
	setIdle(c, time.Nanosecond)
	c.release(alice)
	c.sweepIdle()
	if c.count() != 1 {
		t.Fatal("a store still held was swept")
	}
	if _, err := st.Read(uri); err != nil {
		t.Fatalf("read while held: %v", err)
	}
	// Nobody holds it: gone, with its directory and its bytes.
	c.release(alice)
	time.Sleep(time.Millisecond) // past the (1 ns) idle timeout
	c.sweepIdle()
	// The sweep's own timer may have taken the store first and still be
	// removing it: wait for that, not for a time.
	for end := time.Now().Add(5 * time.Second); (dirEntries(t, dir) != 0 || budget.Used() != 0) && time.Now().Before(end); {
		time.Sleep(time.Millisecond)
	}
	if c.count() != 0 || dirEntries(t, dir) != 0 || budget.Used() != 0 {
		t.Fatalf("after the sweep: %d stores, %d dirs, %d bytes", c.count(), dirEntries(t, dir), budget.Used())
	}

	// close removes what is left and makes no more.
	setIdle(c, time.Hour)
	writeOutput(t, c.acquire(bob, true), "c-2")
	c.close()
	if dirEntries(t, dir) != 0 || budget.Used() != 0 || c.acquire(bob, true) != nil {
		t.Fatalf("after close: %d dirs, %d bytes", dirEntries(t, dir), budget.Used())
	}
}
