package actors

import (
	"testing"
	"time"
)

// TestAfterEnd checks the HTTP front's session-end waiters: a stopped one
// never runs, the others run when the session ends, and one registered
// after the end runs at once.
func TestAfterEnd(t *testing.T) {
	host := NewHost(Options{Logger: testLogger(t)})
	defer host.Close(5 * time.Second)
	s, err := host.StartHTTPSession("s-after-end", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 4)
	stopA := s.AfterEnd(func() { ran <- "a" })
	stopB := s.AfterEnd(func() { ran <- "b" })
	s.AfterEnd(func() { ran <- "c" })
	if !stopA() || stopA() {
		t.Fatal("stop should report true once, then false")
	}
	if s.Ended() {
		t.Fatal("ended before Close")
	}
	s.Close()
	got := map[string]bool{}
	for range 2 {
		select {
		case w := <-ran:
			got[w] = true
		case <-time.After(5 * time.Second):
			t.Fatalf("waiters did not run; ran %v", got)
		}
	}
	if !got["b"] || !got["c"] || !s.Ended() {
		t.Fatalf("ran %v, ended %v; want b and c", got, s.Ended())
	}
	if stopB() {
		t.Fatal("stop after the waiter ran reported true")
	}
	s.AfterEnd(func() { ran <- "late" })
	select {
	case w := <-ran:
		if w != "late" {
			t.Fatalf("ran %q", w)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("a waiter registered after the end did not run")
	}
}
