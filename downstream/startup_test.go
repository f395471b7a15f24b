package downstream_test

import (
	"context"
	"os/exec"
	"slices"
	"testing"
	"time"

	"troupe/downstream"
)

// AwaitStartup ends its wait for a server at once when that server's first
// attempt fails, holds it for one that hangs only as long as allowed, and
// names the servers still connecting.
func TestAwaitStartup(t *testing.T) {
	rt := testRuntime(t)
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh")
	}
	start := func(name, script string) *downstream.Server {
		return downstream.Start(rt, downstream.Spec{StartupTimeout: time.Minute,
			Config: downstream.Config{Name: name, Command: sh, Args: []string{"-c", script}}})
	}
	failing := start("failing", "exit 3")        // down after its first attempt
	hanging := start("hanging", "exec sleep 60") // never answers initialize
	defer failing.Stop()
	defer hanging.Stop()

	if late := downstream.AwaitStartup(context.Background(), []*downstream.Server{failing}, time.Minute); late != nil {
		t.Fatalf("a server that failed is still awaited: %v", late)
	}
	if state, _, _ := failing.State(); state != downstream.StateDown {
		t.Fatalf("the failed server is %s", state)
	}
	if late := downstream.AwaitStartup(context.Background(), []*downstream.Server{failing, hanging}, 100*time.Millisecond); !slices.Equal(late, []string{"hanging"}) {
		t.Fatalf("still connecting: %v, want [hanging]", late)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if late := downstream.AwaitStartup(ctx, []*downstream.Server{hanging, failing}, time.Minute); !slices.Equal(late, []string{"hanging"}) {
		t.Fatalf("after ctx ended: %v, want [hanging]", late)
	}
	if late := downstream.AwaitStartup(context.Background(), []*downstream.Server{hanging}, 0); !slices.Equal(late, []string{"hanging"}) {
		t.Fatalf("no wait: %v", late)
	}
}
