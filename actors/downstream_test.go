package actors

import (
	"context"
	"os/exec"
	"sync"
	"testing"
	"time"

	"troupe/audit"
	"troupe/downstream"
)

// The Host runs the downstream servers' actors: their states reach its
// Observer, Stop forgets a server, and Close stops those still running.
func TestHostStopsItsDownstreams(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	obs := &wiringObserver{}
	host := NewHost(Options{Logger: testLogger(t), Observer: obs})
	closed := false
	defer func() {
		if !closed {
			host.Close(5 * time.Second)
		}
	}()
	start := func(name, script string) *downstream.Server {
		return host.StartDownstream(downstream.Spec{StartupTimeout: time.Minute,
			Config: downstream.Config{Name: name, Command: sh, Args: []string{"-c", script}}})
	}
	failing := start("failing", "exit 3")
	hanging := start("hanging", "exec sleep 60")
	if late := downstream.AwaitStartup(context.Background(), []*downstream.Server{failing}, time.Minute); late != nil {
		t.Fatalf("still connecting: %v", late)
	}
	if got := obs.states("failing"); len(got) == 0 || got[len(got)-1] != downstream.StateDown {
		t.Fatalf("the Observer saw failing's states %v, want it down", got)
	}
	failing.Stop()
	count := func() (n int) {
		host.downstreams.Range(func(_, _ any) bool { n++; return true })
		return n
	}
	if n := count(); n != 1 {
		t.Fatalf("after one of two servers stopped, the Host keeps %d", n)
	}
	if state, _, _ := hanging.State(); state != downstream.StateConnecting {
		t.Fatalf("hanging is %s before Close", state)
	}
	if !host.Close(5 * time.Second) {
		t.Fatal("host did not close")
	}
	closed = true
	if state, _, err := hanging.State(); state != downstream.StateDown || err == nil || err.Error() != "stopped" {
		t.Fatalf("after Close hanging is %s (%v), want down (stopped)", state, err)
	}
	if got := obs.states("hanging"); len(got) == 0 || got[len(got)-1] != downstream.StateDown {
		t.Fatalf("the Observer saw hanging's states %v, want it down at the end", got)
	}
}

// wiringObserver records what the Host's parts outside actors (the audit
// writer, the downstream servers) tell the Observer; the rest it ignores.
type wiringObserver struct {
	mu         sync.Mutex
	downstream map[string][]string
	audited    int
}

func (o *wiringObserver) states(server string) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.downstream[server]...)
}

func (o *wiringObserver) flushed() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.audited
}

func (o *wiringObserver) DownstreamChanged(server, state string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.downstream == nil {
		o.downstream = map[string][]string{}
	}
	o.downstream[server] = append(o.downstream[server], state)
}

func (o *wiringObserver) AuditFlushed(records int, _ time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.audited += records
}

func (*wiringObserver) SessionStarted(string, string, string)            {}
func (*wiringObserver) SessionInitialized(string, string, string)        {}
func (*wiringObserver) SessionEnded(string)                              {}
func (*wiringObserver) RequestServed(string, string, time.Time)          {}
func (*wiringObserver) CallStateChanged(*CallView, CallState)            {}
func (*wiringObserver) ApprovalDecided(*CallView, string, time.Duration) {}
func (*wiringObserver) CallFinished(*CallView, *audit.Record)            {}
func (*wiringObserver) CallStarted(ctx context.Context, _ *CallView) context.Context {
	return ctx
}
