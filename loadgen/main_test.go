package loadgen

import (
	"bufio"
	"encoding/json"
	"os"
	"sync"
	"testing"
	"time"

	"troupe/internal/leakcheck"
)

// The stdio tests start this test binary again as a tiny MCP server: with
// LOADGEN_ECHO_SERVER=1, TestMain runs echoServer instead of the tests.
func TestMain(m *testing.M) {
	if os.Getenv("LOADGEN_ECHO_SERVER") == "1" {
		echoServer()
		os.Exit(0)
	}
	// The rate-limit tests run an actor host, whose dead-letter throttle
	// outlives it by a second: leakcheck waits for it.
	leakcheck.VerifyTestMain(m)
}

// echoServer is a hand-written stdio MCP server with three tools: "echo"
// answers with its arguments, "fail" answers with isError, "slow" answers
// after 20 ms; any other tool is a JSON-RPC error -32602. Calls are
// answered concurrently, each from its own goroutine.
func echoServer() {
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	send := func(b []byte) {
		mu.Lock()
		defer mu.Unlock()
		w.Write(b)
		w.WriteByte('\n')
		w.Flush()
	}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil {
			continue
		}
		id := string(req.ID)
		switch req.Method {
		case "initialize":
			send([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"echo","version":"1"}}}`))
		case "tools/call":
			name, args := req.Params.Name, req.Params.Arguments
			go func() {
				switch name {
				case "echo", "slow":
					if name == "slow" {
						time.Sleep(20 * time.Millisecond)
					}
					text, _ := json.Marshal(string(args))
					send([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":` + string(text) + `}]}}`))
				case "fail":
					send([]byte(`{"jsonrpc":"2.0","id":` + id + `,"result":{"content":[{"type":"text","text":"no \"isError\":true here"}],"isError":true}}`))
				default:
					send([]byte(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32602,"message":"unknown tool"}}`))
				}
			}()
		default:
			send([]byte(`{"jsonrpc":"2.0","id":` + id + `,"error":{"code":-32601,"message":"method not found"}}`))
		}
	}
}

// echoTarget is this binary as a stdio server.
func echoTarget(t *testing.T) Target {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Target{Command: []string{exe, "-test.run=^$"}, Env: append(os.Environ(), "LOADGEN_ECHO_SERVER=1",
		// The race detector would otherwise sleep a second at exit.
		"GORACE=atexit_sleep_ms=0")}
}
