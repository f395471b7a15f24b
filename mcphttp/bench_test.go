package mcphttp

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"troupe/actors"
	"troupe/tools"
)

// BenchmarkHTTPCall measures one tools/call of a session through the HTTP
// front (handler, session, invoker, reply), in-process with an
// httptest.ResponseRecorder: the front's and the runtime's costs without
// the network's. Run with -benchmem for allocations per call.
func BenchmarkHTTPCall(b *testing.B) {
	reg, err := tools.NewRegistry(echoTool())
	if err != nil {
		b.Fatal(err)
	}
	host := actors.NewHost(actors.Options{Session: actors.SessionOptions{Registry: reg}})
	defer host.Close(5 * time.Second)
	h := New(host, Options{})
	post := func(session string, body []byte) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/mcp", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("MCP-Protocol-Version", "2025-06-18")
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, req)
		return w
	}
	w := post("", []byte(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`))
	id := w.Header().Get("Mcp-Session-Id")
	post(id, []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`))
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{"text":"hi"}}}`)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if w := post(id, body); w.Code != http.StatusOK {
			b.Fatal(w.Code, w.Body.String())
		}
	}
}
