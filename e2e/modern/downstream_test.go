package modern

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	mcpgo "github.com/mark3labs/mcp-go/mcp"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Downstream servers of both eras, reached through troupe by clients of both
// eras:
//
//   - modern: a go-sdk v1.8.0 server speaking 2026-07-28 (internal/statelessserver),
//     over stdio and, as "modernhttp", over streamable HTTP in the SDK's
//     stateless mode; its deploy tool asks through a multi round-trip request.
//   - legacy: server-everything (session-based), whose
//     trigger-elicitation-request asks with elicitation/create mid-call.
//
// troupe discovers the era of each and speaks it; questions cross the hop in
// the client's own era, and troupe's approval is asked first.

var (
	serverOnce sync.Once
	serverBin  string
	serverErr  error
)

// statelessServer builds internal/statelessserver once.
func statelessServer(t *testing.T) string {
	t.Helper()
	serverOnce.Do(func() {
		serverBin = filepath.Join(binDir, "statelessserver")
		out, err := exec.Command("go", "build", "-o", serverBin, "./internal/statelessserver").CombinedOutput()
		if err != nil {
			serverErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if serverErr != nil {
		t.Fatal(serverErr)
	}
	return serverBin
}

// startStatelessHTTP runs the stateless server over HTTP and returns its
// endpoint.
func startStatelessHTTP(t *testing.T) string {
	t.Helper()
	cmd := exec.Command(statelessServer(t), "-http", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
		}
	}()
	select {
	case url := <-found:
		return url
	case <-time.After(httpStartTimeout):
		t.Fatal("the stateless server did not start")
		return ""
	}
}

// everythingEntry is server-everything's entry point, installed by
// scripts/test under e2e/downstream.
func everythingEntry(t *testing.T) string {
	t.Helper()
	p := filepath.Join(moduleRoot, "e2e", "downstream", "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("server-everything is not installed (scripts/test installs it): %v", err)
	}
	return p
}

// downstreamConfigFile is a troupe config with the three downstream servers.
func downstreamConfigFile(t *testing.T) string {
	t.Helper()
	return writeConfig(t, fmt.Sprintf("[mcp_servers.modern]\ncommand = %q\n\n[mcp_servers.modernhttp]\nurl = %q\n\n",
		statelessServer(t), startStatelessHTTP(t))+everythingTable(t, ""))
}

// everythingTable is the [mcp_servers.everything] table that runs
// server-everything over stdio, with extra lines in it.
func everythingTable(t *testing.T, extra string) string {
	t.Helper()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	return fmt.Sprintf("[mcp_servers.everything]\ncommand = %q\nargs = [%q, \"stdio\"]\nenv_vars = [\"PATH\", \"HOME\"]\n%s\n",
		node, everythingEntry(t), extra)
}

// writeConfig writes a troupe config of the servers' tables (and the
// startup wait they need) and returns its path.
func writeConfig(t *testing.T, tables string) string {
	t.Helper()
	file := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(file, []byte(tables+"[limits]\nmcp_servers_startup_wait = \"15s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// answerer answers every question a person would: troupe's approval
// ("once"), the stateless server's deploy confirmation, and
// server-everything's form. It records the messages it was shown.
type answerer struct {
	mu    sync.Mutex
	asked []string
}

func (a *answerer) handle(_ context.Context, req *gosdk.ElicitRequest) (*gosdk.ElicitResult, error) {
	return &gosdk.ElicitResult{Action: "accept", Content: a.answer(req.Params.Message, req.Params.RequestedSchema)}, nil
}

// answer is what a person answers to message with schema.
func (a *answerer) answer(message string, schema any) map[string]any {
	a.mu.Lock()
	a.asked = append(a.asked, message)
	a.mu.Unlock()
	s := fmt.Sprint(schema)
	switch {
	case strings.Contains(s, "decision"):
		return map[string]any{"decision": "once"}
	case strings.Contains(s, "confirm"):
		return map[string]any{"confirm": true}
	}
	return map[string]any{"name": "Ada", "check": true}
}

// Elicit makes the answerer mcp-go's elicitation handler.
func (a *answerer) Elicit(_ context.Context, req mcpgo.ElicitationRequest) (*mcpgo.ElicitationResult, error) {
	return &mcpgo.ElicitationResult{ElicitationResponse: mcpgo.ElicitationResponse{
		Action: mcpgo.ElicitationResponseActionAccept, Content: a.answer(req.Params.Message, req.Params.RequestedSchema)}}, nil
}

func (a *answerer) messages() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.asked...)
}

// connectAnswering connects the go-sdk client at version ("" for its
// default, 2026-07-28) with the answerer as its elicitation handler.
func connectAnswering(t *testing.T, tg *target, version string, a *answerer) *gosdk.ClientSession {
	t.Helper()
	client := gosdk.NewClient(&gosdk.Implementation{Name: "troupe-e2e-downstream", Version: "1.0.0"},
		&gosdk.ClientOptions{ElicitationHandler: a.handle})
	cs := connectWith(t, tg, client, version)
	want := version
	if want == "" {
		want = modernVersion
	}
	if v := cs.InitializeResult().ProtocolVersion; v != want {
		t.Fatalf("negotiated %q over %s, want %q", v, tg.name, want)
	}
	return cs
}

func TestDownstreamServersOfBothEras(t *testing.T) {
	cfg := downstreamConfigFile(t)
	forEachTransportWith(t, []string{"--config", cfg}, func(t *testing.T, fx fixture, tg *target) {
		for _, kind := range []struct {
			name    string
			connect func(t *testing.T, a *answerer) session
		}{
			{"go-sdk-modern", func(t *testing.T, a *answerer) session { return &goSDKSession{cs: connectAnswering(t, tg, "", a)} }},
			{"go-sdk-legacy", func(t *testing.T, a *answerer) session {
				return &goSDKSession{cs: connectAnswering(t, tg, legacyVersion, a)}
			}},
			{"mcp-go-modern", func(t *testing.T, a *answerer) session {
				s, _, err := connectMCPGo(t, tg, connectOptions{elicit: a})
				if err != nil {
					t.Fatalf("connecting over %s: %v", tg.name, err)
				}
				t.Cleanup(func() { _ = s.Close() })
				if v := s.Version(); v != modernVersion {
					t.Fatalf("mcp-go negotiated %q", v)
				}
				return s
			}},
		} {
			t.Run(kind.name, func(t *testing.T) {
				a := &answerer{}
				s := kind.connect(t, a)
				call := func(name string, args map[string]any) string {
					t.Helper()
					res, err := s.CallTool(ctxFor(t), name, args, nil)
					if err != nil {
						t.Fatalf("%s: %v (troupe's log:\n%s)", name, err, tg.log)
					}
					if res.IsError {
						t.Fatalf("%s: isError: %s (troupe's log:\n%s)", name, res.Text, tg.log)
					}
					return res.Text
				}
				for _, srv := range []string{"modern", "modernhttp"} {
					if got := call(srv+".greet", map[string]any{"name": "Ada"}); got != "hello Ada" {
						t.Errorf("%s.greet: %q", srv, got)
					}
					before := len(a.messages())
					if got := call(srv+".deploy", map[string]any{"target": "prod"}); got != "deployed to prod" {
						t.Errorf("%s.deploy: %q", srv, got)
					}
					// troupe's approval first, then the server's own question.
					asked := a.messages()[before:]
					if len(asked) != 2 || !strings.Contains(asked[0], srv+".deploy") || asked[1] != "Deploy to prod?" {
						t.Errorf("%s.deploy asked %q", srv, asked)
					}
				}
				before := len(a.messages())
				if got := call("everything.trigger-elicitation-request", nil); !strings.Contains(got, "Ada") {
					t.Errorf("everything.trigger-elicitation-request: %q", got)
				}
				if asked := a.messages()[before:]; len(asked) != 2 || !strings.Contains(asked[0], "everything.trigger-elicitation-request") ||
					!strings.Contains(asked[1], "Please provide inputs") {
					t.Errorf("everything asked %q", asked)
				}
			})
		}
	})
}
