package downstream_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"troupe/downstream"
)

// floodVar, set in the environment of the test binary re-executed by
// TestDownstreamListChangedFlood, makes it the flooding stdio server of
// TestFloodingDownstreamServer; its value is how many notifications it
// sends.
const floodVar = "DOWNSTREAM_TEST_FLOOD"

// TestFloodingDownstreamServer is not a test: re-executed with floodVar set,
// the test binary becomes a stdio MCP server that answers the first
// tools/list at once and then sends floodVar notifications/tools/list_changed
// as fast as it can. Each later tools/list is answered with one tool named
// after the number of notifications sent when the request arrived
// ("t<n>"), but only once the flood is over: a client that re-lists on
// every notification has them all in flight together, and only a listing
// asked for after the last notification sees "t<N>".
func TestFloodingDownstreamServer(t *testing.T) {
	n, err := strconv.Atoi(os.Getenv(floodVar))
	if err != nil {
		t.Skip("the flooding server of TestDownstreamListChangedFlood; runs only as its child")
	}
	var wmu sync.Mutex
	out := bufio.NewWriter(os.Stdout)
	write := func(v any) {
		b, _ := json.Marshal(v)
		wmu.Lock()
		defer wmu.Unlock()
		out.Write(append(b, '\n'))
		out.Flush()
	}
	var sent atomic.Int64
	flooded := make(chan struct{})
	var flood sync.Once
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	for in.Scan() {
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(in.Bytes(), &m) != nil || m.ID == nil {
			continue // notifications/initialized, responses
		}
		answer := func(result any) {
			write(map[string]any{"jsonrpc": "2.0", "id": m.ID, "result": result})
		}
		switch m.Method {
		case "initialize":
			answer(map[string]any{"protocolVersion": "2025-06-18",
				"capabilities": map[string]any{"tools": map[string]any{"listChanged": true}},
				"serverInfo":   map[string]any{"name": "flood", "version": "1"}})
		case "tools/list":
			gen := sent.Load()
			tools := func() map[string]any {
				return map[string]any{"tools": []any{map[string]any{"name": fmt.Sprintf("t%d", gen),
					"inputSchema": map[string]any{"type": "object"}}}}
			}
			started := false
			flood.Do(func() {
				started = true
				answer(tools())
				go func() {
					for range n {
						sent.Add(1)
						write(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
					}
					close(flooded)
				}()
			})
			if !started {
				<-flooded
				answer(tools())
			}
		default:
			answer(map[string]any{})
		}
	}
	os.Exit(0)
}

// A downstream server that sends thousands of list_changed notifications
// costs troupe one tools/list at a time and one more after it, not a
// goroutine and a listing per notification; and the tool list it ends with
// is the one the server listed after its last notification.
func TestDownstreamListChangedFlood(t *testing.T) {
	const notifications = 5000
	changed := make(chan struct{}, 1)
	d := downstream.Start(testRuntime(t), downstream.Spec{StartupTimeout: time.Minute,
		Config: downstream.Config{Name: "flood", Command: os.Args[0], Era: downstream.ForceLegacy,
			Args: []string{"-test.run=^TestFloodingDownstreamServer$"},
			Env:  map[string]string{floodVar: strconv.Itoa(notifications)}},
		Changed: func() {
			select {
			case changed <- struct{}{}:
			default:
			}
		}})
	defer d.Stop()

	baseline := runtime.NumGoroutine()
	peak, want := 0, fmt.Sprintf("t%d", notifications)
	deadline := time.Now().Add(30 * time.Second)
	for {
		peak = max(peak, runtime.NumGoroutine())
		state, list, err := d.State()
		if state == downstream.StateReady && len(list) == 1 {
			var tool struct{ Name string }
			if json.Unmarshal(list[0], &tool) == nil && tool.Name == want {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool list never became [%s]: state %s, tools %s, err %v", want, state, list, err)
		}
		select {
		case <-changed:
		case <-time.After(time.Millisecond):
		}
	}
	// The listing that brought t<N> ends its goroutine just after; a
	// re-listing per notification would have had thousands in flight.
	if grew := peak - baseline; grew > 50 {
		t.Fatalf("%d list_changed notifications grew troupe by %d goroutines (baseline %d)", notifications, grew, baseline)
	}
}

// testRuntime is a Runtime of an actor system of the test's own, shut
// down when the test ends (after the servers it started have stopped).
func testRuntime(t *testing.T) downstream.Runtime {
	t.Helper()
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	return downstream.Runtime{System: system}
}
