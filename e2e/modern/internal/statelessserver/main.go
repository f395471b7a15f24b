// Command statelessserver is a downstream MCP server for troupe's e2e
// tests, built on the official Go SDK (v1.8.0) and serving the stateless
// revision 2026-07-28: over stdio (the default) or, with -http ADDR, over
// streamable HTTP in the SDK's stateless mode. Its tools:
//
//   - greet {name}: "hello <name>", and a progress notification.
//   - deploy {target}: asks "Deploy to <target>?" through a multi
//     round-trip request (input_required with one elicitation and a
//     requestState); the retry answers "deployed to <target>" when the
//     answer accepts with confirm=true, "not deployed" otherwise.
//   - summarize {text}: asks the client's model through a multi round-trip
//     request (input_required with one sampling/createMessage); the retry
//     answers "summary: <the model's text>".
//
// Its prompt brief {topic} says "Brief me on <topic>." with an embedded
// resource, and its resource stateless://blob is binary (not UTF-8).
//
// It writes nothing to stdout but the protocol.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// deployState is the requestState of deploy's question; a real server
// would protect it, and this one checks it comes back unchanged.
const deployState = "deploy-question-1"

// blob is the binary resource's contents: bytes that are not UTF-8, so a
// hop that decoded them as text would change them.
var blob = []byte{0x00, 0xff, 0xfe, 0x80, 'M', 'C', 'P', 0xc3, 0x28, 0x0a}

func main() {
	addr := flag.String("http", "", "serve streamable HTTP on this address (default: stdio)")
	flag.Parse()
	log.SetOutput(os.Stderr)

	server := mcp.NewServer(&mcp.Implementation{Name: "stateless-e2e", Version: "1.0.0"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "greet", Description: "greets", Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true}},
		func(ctx context.Context, req *mcp.CallToolRequest, in struct {
			Name string `json:"name"`
		}) (*mcp.CallToolResult, any, error) {
			if tok := req.Params.GetProgressToken(); tok != nil {
				_ = req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: tok, Progress: 1, Total: 1, Message: "greeting"})
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "hello " + in.Name}}}, nil, nil
		})
	server.AddTool(&mcp.Tool{Name: "deploy", Description: "deploys after asking",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"target": map[string]any{"type": "string"}}}},
		deploy)
	server.AddTool(&mcp.Tool{Name: "summarize", Description: "summarizes with the client's model",
		InputSchema: map[string]any{"type": "object", "properties": map[string]any{"text": map[string]any{"type": "string"}}}},
		summarize)
	server.AddPrompt(&mcp.Prompt{Name: "brief", Description: "asks for a brief",
		Arguments: []*mcp.PromptArgument{{Name: "topic", Required: true}}},
		func(_ context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			return &mcp.GetPromptResult{Description: "a brief", Messages: []*mcp.PromptMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Brief me on " + req.Params.Arguments["topic"] + "."}},
				{Role: "user", Content: &mcp.EmbeddedResource{Resource: &mcp.ResourceContents{URI: "stateless://blob", MIMEType: "application/octet-stream", Blob: blob}}},
			}}, nil
		})
	server.AddResource(&mcp.Resource{URI: "stateless://blob", Name: "blob", MIMEType: "application/octet-stream"},
		func(context.Context, *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: "stateless://blob", MIMEType: "application/octet-stream", Blob: blob}}}, nil
		})

	if *addr == "" {
		if err := server.Run(context.Background(), &mcp.StdioTransport{}); err != nil {
			log.Fatal(err)
		}
		return
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintf(os.Stderr, "listening on http://%s/mcp\n", ln.Addr())
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	log.Fatal(http.Serve(ln, mux))
}

// deploy is the multi round-trip tool.
func deploy(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Target string `json:"target"`
	}
	_ = jsonUnmarshal(req.Params.Arguments, &args)
	answer, ok := req.Params.InputResponses["confirm"].(*mcp.ElicitResult)
	if !ok {
		return &mcp.CallToolResult{RequestState: deployState, InputRequests: mcp.InputRequestMap{
			"confirm": &mcp.ElicitParams{Mode: "form", Message: "Deploy to " + args.Target + "?",
				RequestedSchema: map[string]any{"type": "object",
					"properties": map[string]any{"confirm": map[string]any{"type": "boolean"}}, "required": []string{"confirm"}}},
		}}, nil
	}
	if req.Params.RequestState != deployState {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "bad requestState " + req.Params.RequestState}}}, nil
	}
	if answer.Action == "accept" && answer.Content["confirm"] == true {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "deployed to " + args.Target}}}, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "not deployed (" + answer.Action + ")"}}}, nil
}

// summarize is the multi round-trip tool that samples.
func summarize(_ context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		Text string `json:"text"`
	}
	_ = jsonUnmarshal(req.Params.Arguments, &args)
	// The SDK reads every sampling answer as the with-tools form.
	answer, ok := req.Params.InputResponses["sample"].(*mcp.CreateMessageWithToolsResult)
	if !ok {
		return &mcp.CallToolResult{RequestState: "summarize-1", InputRequests: mcp.InputRequestMap{
			"sample": &mcp.CreateMessageParams{MaxTokens: 50, Messages: []*mcp.SamplingMessage{
				{Role: "user", Content: &mcp.TextContent{Text: "Summarize: " + args.Text}}}},
		}}, nil
	}
	for _, c := range answer.Content {
		if text, ok := c.(*mcp.TextContent); ok {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "summary: " + text.Text}}}, nil
		}
	}
	return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "the model answered no text"}}}, nil
}

func jsonUnmarshal(raw []byte, v any) error {
	if len(raw) == 0 {
		return nil
	}
	return json.Unmarshal(raw, v)
}
