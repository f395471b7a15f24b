// Command mcpgo is the benchmark peer built on github.com/mark3labs/mcp-go:
// one tool, echo ({"text": string} → one text block). It serves stdio by
// default, streamable HTTP at /mcp with --http ADDR, without sessions (mcp-go's
// stateless mode) with --stateless as well.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"github.com/mark3labs/mcp-go/mcp"
	"github.com/mark3labs/mcp-go/server"
)

func main() {
	addr := flag.String("http", "", "serve streamable HTTP at /mcp on this address instead of stdio")
	stateless := flag.Bool("stateless", false, "with --http: keep no sessions (each request stands alone)")
	flag.Parse()

	s := server.NewMCPServer("mcpgo-echo", "1.0.0", server.WithToolCapabilities(false))
	s.AddTool(mcp.NewTool("echo",
		mcp.WithDescription("Echo the text back."),
		mcp.WithString("text", mcp.Required(), mcp.Description("text to echo")),
	), func(_ context.Context, req mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return mcp.NewToolResultText(req.GetString("text", "")), nil
	})

	var err error
	if *addr != "" {
		// Stateful: sessions are kept server-side, as troupe keeps them;
		// stateless: each request stands alone, as 2026-07-28 asks.
		opt := server.WithStateful(true)
		if *stateless {
			opt = server.WithStateLess(true)
		}
		err = server.NewStreamableHTTPServer(s, opt).Start(*addr)
	} else {
		err = server.ServeStdio(s)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcpgo:", err)
		os.Exit(1)
	}
}
