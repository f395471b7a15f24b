// Package modern holds end-to-end tests of troupe against real MCP clients
// that speak revision 2026-07-28 (the stateless era): the official Go SDK
// (github.com/modelcontextprotocol/go-sdk) and mcp-go
// (github.com/mark3labs/mcp-go), over stdio and streamable HTTP, plus a
// legacy (2025-11-25) client against the same server.
//
// It is a Go module of its own so that the client libraries never enter
// troupe's go.mod. The tests build troupe from the parent module with
// `go build` and run the binary as a real subprocess; nothing here is linked
// into troupe. Run them with `go test ./...` in this directory (scripts/test
// does so after troupe's own tests).
package modern
