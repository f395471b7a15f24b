package mcphttp_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"troupe/actors"
	"troupe/mcphttp"
	"troupe/tools"
)

// Mount the handler on a ServeMux: it serves its MCP path and /healthz,
// so both go to it. Here the mux answers in memory; a real server passes
// it to an http.Server (see Example_serve).
func ExampleNew() {
	reg, err := tools.NewRegistry() // your tools here
	if err != nil {
		log.Fatal(err)
	}
	host := actors.NewHost(actors.Options{Session: actors.SessionOptions{Registry: reg}})
	defer host.Close(5 * time.Second)

	h := mcphttp.New(host, mcphttp.Options{CheckHost: true})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/healthz", h)

	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8080/mcp", strings.NewReader(
		`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",`+
			`"capabilities":{},"clientInfo":{"name":"example","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	var answer struct {
		Result struct{ ProtocolVersion string }
	}
	_ = json.Unmarshal(rec.Body.Bytes(), &answer)
	fmt.Println("initialize:", rec.Code, answer.Result.ProtocolVersion)
	fmt.Println("session id length:", len(rec.Header().Get("Mcp-Session-Id")))
	fmt.Println("sessions:", h.Sessions())

	rec = httptest.NewRecorder()
	mux.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "http://127.0.0.1:8080/healthz", nil))
	fmt.Print("healthz: ", rec.Code, " ", rec.Body.String())
	// Output:
	// initialize: 200 2025-06-18
	// session id length: 32
	// sessions: 1
	// healthz: 200 ok
}

// Serve on loopback and shut down in order: refuse new sessions, let the
// sessions drain, close the HTTP server (its open streams end with their
// sessions), then stop the actors. (Compiled, not run: it listens.)
func Example_serve() {
	reg, err := tools.NewRegistry()
	if err != nil {
		log.Fatal(err)
	}
	host := actors.NewHost(actors.Options{Session: actors.SessionOptions{Registry: reg}, Grace: 10 * time.Second})
	h := mcphttp.New(host, mcphttp.Options{
		BearerToken: "from-the-environment", // never hard-coded in real code
		CheckHost:   true,                   // listening on loopback: refuse DNS-rebinding Host names
	})
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		if err := srv.ListenAndServe(); err != nil && err != http.ErrServerClosed {
			log.Fatal(err)
		}
	}()

	// … on SIGTERM:
	h.StopAccepting()
	host.Drain()
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
	host.Close(5 * time.Second)
}
