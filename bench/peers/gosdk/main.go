// Command gosdk is the benchmark peer built on the official
// github.com/modelcontextprotocol/go-sdk: one tool, echo ({"text": string}
// → one text block). It serves stdio by default, streamable HTTP at /mcp
// with --http ADDR, without sessions (go-sdk's stateless mode) with
// --stateless as well.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type echoIn struct {
	Text string `json:"text" jsonschema:"text to echo"`
}

func main() {
	addr := flag.String("http", "", "serve streamable HTTP at /mcp on this address instead of stdio")
	stateless := flag.Bool("stateless", false, "with --http: keep no sessions (each request stands alone)")
	flag.Parse()

	s := mcp.NewServer(&mcp.Implementation{Name: "gosdk-echo", Version: "1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "echo", Description: "Echo the text back."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Text}}}, nil, nil
		})

	var err error
	if *addr != "" {
		mux := http.NewServeMux()
		mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
			&mcp.StreamableHTTPOptions{Stateless: *stateless}))
		err = http.ListenAndServe(*addr, mux)
	} else {
		err = s.Run(context.Background(), &mcp.StdioTransport{})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "gosdk:", err)
		os.Exit(1)
	}
}
