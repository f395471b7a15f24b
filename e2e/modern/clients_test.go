package modern

import (
	"context"
	"encoding/json"
	"net/http"
	"os/exec"
	"testing"

	mcpgoclient "github.com/mark3labs/mcp-go/client"
	mcpgotransport "github.com/mark3labs/mcp-go/client/transport"
	mcpgo "github.com/mark3labs/mcp-go/mcp"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// Protocol revisions the tests name.
const (
	modernVersion = "2026-07-28"
	legacyVersion = "2025-11-25"
	// futureVersion is a revision no one implements yet: it sorts after
	// 2026-07-28, so both clients treat it as a modern one and send it.
	futureVersion = "2099-01-01"
)

// session is what a test does with a connected client, whichever library.
type session interface {
	// Version is the protocol version the client settled on.
	Version() string
	// ServerName is the server's name as the client learnt it.
	ServerName() string
	ListTools(ctx context.Context) ([]string, error)
	// CallTool calls a tool; meta, when not nil, is merged into the
	// request's _meta (clients that rewrite _meta themselves ignore it).
	CallTool(ctx context.Context, name string, args map[string]any, meta map[string]any) (*callResult, error)
	Close() error
}

// callResult is a tools/call result as the client decoded it.
type callResult struct {
	IsError bool
	Text    string // the text blocks, joined
}

// connectOptions say how a client connects.
type connectOptions struct {
	version string // the revision to ask for; "" for the client's default
	legacy  bool   // only the initialize handshake (mcp-go's WithLegacyProtocolOnly)
	// elicit answers elicitation (mcp-go: set with WithElicitationHandler,
	// which also declares the capability); nil declares none.
	elicit mcpgoclient.ElicitationHandler
}

// clientKind is one client library.
type clientKind struct {
	name    string
	connect func(t *testing.T, tg *target, o connectOptions) (session, *recorder, error)
}

// clients are the two libraries every modern scenario runs with.
var clients = []clientKind{
	{"go-sdk", connectGoSDK},
	{"mcp-go", connectMCPGo},
}

// forEachClient runs body for each client library over each transport.
func forEachClient(t *testing.T, body func(t *testing.T, fx fixture, tg *target, ck clientKind)) {
	for _, ck := range clients {
		t.Run(ck.name, func(t *testing.T) {
			forEachTransport(t, func(t *testing.T, fx fixture, tg *target) { body(t, fx, tg, ck) })
		})
	}
}

// mustConnect connects ck to tg, failing the test on error. The session
// closes at cleanup, and closing must succeed (over stdio: troupe exits 0
// once its input is closed).
func mustConnect(t *testing.T, tg *target, ck clientKind, o connectOptions) (session, *recorder) {
	t.Helper()
	s, rec, err := ck.connect(t, tg, o)
	if err != nil {
		t.Fatalf("%s: connecting over %s: %v", ck.name, tg.name, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("%s: closing the session: %v", ck.name, err)
		}
	})
	return s, rec
}

// connectModern connects ck to tg with its default (2026-07-28) and
// requires that the client really settled on it: the go-sdk client falls
// back to initialize silently when server/discover fails.
func connectModern(t *testing.T, tg *target, ck clientKind) (session, *recorder) {
	t.Helper()
	s, rec := mustConnect(t, tg, ck, connectOptions{})
	if v := s.Version(); v != modernVersion {
		t.Fatalf("%s fell back to %q over %s, want %s (exchanges: %s)", ck.name, v, tg.name, modernVersion, describe(rec.all("")))
	}
	return s, rec
}

// ctxFor is a context bounded by callTimeout for one test.
func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// httpClient is a client whose requests go through a recorder.
func httpClient(rec *recorder, token string) *http.Client {
	return &http.Client{Transport: &recordingTransport{rec: rec, token: token,
		base: &http.Transport{Proxy: nil}}}
}

// --- the official Go SDK ---

type goSDKSession struct{ cs *gosdk.ClientSession }

func connectGoSDK(t *testing.T, tg *target, o connectOptions) (session, *recorder, error) {
	rec := &recorder{}
	// No roots, no elicitation: the client declares nothing it does not do.
	client := gosdk.NewClient(&gosdk.Implementation{Name: "troupe-e2e-go-sdk", Version: "1.0.0"},
		&gosdk.ClientOptions{Capabilities: &gosdk.ClientCapabilities{}})
	var tr gosdk.Transport
	if tg.http != nil {
		tr = &gosdk.StreamableClientTransport{Endpoint: tg.http.url, HTTPClient: httpClient(rec, tg.http.token), MaxRetries: -1}
	} else {
		cmd := exec.Command(troupeBinary(t), tg.stdioArgs()...)
		cmd.Env = serverEnv()
		cmd.Stderr = tg.log
		tr = &recordingGoSDKTransport{Transport: &gosdk.CommandTransport{Command: cmd, TerminateDuration: stopTimeout}, rec: rec}
	}
	cs, err := client.Connect(ctxFor(t), tr, &gosdk.ClientSessionOptions{ProtocolVersion: o.version})
	if err != nil {
		return nil, rec, err
	}
	return &goSDKSession{cs: cs}, rec, nil
}

func (s *goSDKSession) Version() string { return s.cs.InitializeResult().ProtocolVersion }

func (s *goSDKSession) ServerName() string {
	if info := s.cs.InitializeResult().ServerInfo; info != nil {
		return info.Name
	}
	return ""
}

func (s *goSDKSession) ListTools(ctx context.Context) ([]string, error) {
	var names []string
	for tool, err := range s.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, err
		}
		names = append(names, tool.Name)
	}
	return names, nil
}

func (s *goSDKSession) CallTool(ctx context.Context, name string, args map[string]any, meta map[string]any) (*callResult, error) {
	params := &gosdk.CallToolParams{Name: name, Arguments: args}
	if meta != nil {
		params.Meta = gosdk.Meta(meta)
	}
	res, err := s.cs.CallTool(ctx, params)
	if err != nil {
		return nil, err
	}
	out := &callResult{IsError: res.IsError}
	for _, c := range res.Content {
		if tc, ok := c.(*gosdk.TextContent); ok {
			out.Text += tc.Text
		}
	}
	return out, nil
}

func (s *goSDKSession) Close() error { return s.cs.Close() }

// recordingGoSDKTransport records what a go-sdk stdio connection writes and
// reads (its HTTP transport is recorded below it, at the HTTP client).
type recordingGoSDKTransport struct {
	gosdk.Transport
	rec *recorder
}

func (t *recordingGoSDKTransport) Connect(ctx context.Context) (gosdk.Connection, error) {
	c, err := t.Transport.Connect(ctx)
	if err != nil {
		return nil, err
	}
	return &recordingGoSDKConn{Connection: c, rec: t.rec}, nil
}

type recordingGoSDKConn struct {
	gosdk.Connection
	rec *recorder
}

func (c *recordingGoSDKConn) Read(ctx context.Context) (jsonrpc.Message, error) {
	msg, err := c.Connection.Read(ctx)
	if err == nil {
		if raw, err := jsonrpc.EncodeMessage(msg); err == nil {
			c.rec.received(raw)
		}
	}
	return msg, err
}

func (c *recordingGoSDKConn) Write(ctx context.Context, msg jsonrpc.Message) error {
	if raw, err := jsonrpc.EncodeMessage(msg); err == nil {
		c.rec.sent(raw)
	}
	return c.Connection.Write(ctx, msg)
}

// --- mcp-go ---

type mcpGoSession struct {
	c    *mcpgoclient.Client
	init *mcpgo.InitializeResult
}

func connectMCPGo(t *testing.T, tg *target, o connectOptions) (session, *recorder, error) {
	rec := &recorder{}
	var tr mcpgotransport.Interface
	if tg.http != nil {
		h, err := mcpgotransport.NewStreamableHTTP(tg.http.url, mcpgotransport.WithHTTPBasicClient(httpClient(rec, tg.http.token)))
		if err != nil {
			return nil, rec, err
		}
		tr = h
	} else {
		stdio := mcpgotransport.NewStdioWithOptions(troupeBinary(t), nil, tg.stdioArgs(),
			mcpgotransport.WithCommandFunc(func(_ context.Context, command string, _ []string, args []string) (*exec.Cmd, error) {
				cmd := exec.Command(command, args...)
				cmd.Env = serverEnv()
				cmd.Stderr = tg.log
				return cmd, nil
			}))
		tr = &recordingMCPGoStdio{Stdio: stdio, rec: rec}
	}
	var opts []mcpgoclient.ClientOption
	if o.version != "" {
		opts = append(opts, mcpgoclient.WithProtocolVersion(o.version))
	}
	if o.legacy {
		opts = append(opts, mcpgoclient.WithLegacyProtocolOnly())
	}
	if o.elicit != nil {
		opts = append(opts, mcpgoclient.WithElicitationHandler(o.elicit))
	}
	c := mcpgoclient.NewClient(tr, opts...)
	ctx := ctxFor(t)
	if err := c.Start(ctx); err != nil {
		return nil, rec, err
	}
	res, err := c.Initialize(ctx, mcpgo.InitializeRequest{Params: mcpgo.InitializeParams{
		ProtocolVersion: o.version,
		ClientInfo:      mcpgo.Implementation{Name: "troupe-e2e-mcp-go", Version: "1.0.0"},
	}})
	if err != nil {
		_ = c.Close()
		return nil, rec, err
	}
	return &mcpGoSession{c: c, init: res}, rec, nil
}

func (s *mcpGoSession) Version() string    { return s.c.ProtocolVersion() }
func (s *mcpGoSession) ServerName() string { return s.init.ServerInfo.Name }

func (s *mcpGoSession) ListTools(ctx context.Context) ([]string, error) {
	res, err := s.c.ListTools(ctx, mcpgo.ListToolsRequest{})
	if err != nil {
		return nil, err
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
	}
	return names, nil
}

func (s *mcpGoSession) CallTool(ctx context.Context, name string, args map[string]any, _ map[string]any) (*callResult, error) {
	res, err := s.c.CallTool(ctx, mcpgo.CallToolRequest{Params: mcpgo.CallToolParams{Name: name, Arguments: args}})
	if err != nil {
		return nil, err
	}
	out := &callResult{IsError: res.IsError}
	for _, c := range res.Content {
		if tc, ok := mcpgo.AsTextContent(c); ok {
			out.Text += tc.Text
		}
	}
	return out, nil
}

func (s *mcpGoSession) Close() error { return s.c.Close() }

// recordingMCPGoStdio records an mcp-go stdio transport's requests and
// responses; embedding keeps the transport's other interfaces.
type recordingMCPGoStdio struct {
	*mcpgotransport.Stdio
	rec *recorder
}

func (r *recordingMCPGoStdio) SendRequest(ctx context.Context, req mcpgotransport.JSONRPCRequest) (*mcpgotransport.JSONRPCResponse, error) {
	if raw, err := json.Marshal(req); err == nil {
		r.rec.sent(raw)
	}
	resp, err := r.Stdio.SendRequest(ctx, req)
	if err == nil && resp != nil {
		if raw, err := json.Marshal(resp); err == nil {
			r.rec.received(raw)
		}
	}
	return resp, err
}
