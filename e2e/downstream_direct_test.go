package e2e

// These tests drive the pinned downstream servers (downstream_servers_test.go)
// DIRECTLY with the TS runner, no troupe in between. They prove the helpers
// start the servers, and they are the baseline the downstream-server tests
// compare troupe against: calling <name>.<tool> through troupe should give
// what everythingCalls and the filesystem calls give here.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// everythingCalls are server-everything's deterministic tool calls.
func everythingCalls() []step {
	return []step{
		callTool("echo", map[string]any{"message": "héllo, troupe"}),
		callTool("get-sum", map[string]any{"a": 2.5, "b": -7}),
		callTool("get-structured-content", map[string]any{"location": "Chicago"}),
		callTool("get-tiny-image", map[string]any{}),
		callTool("get-resource-links", map[string]any{"count": 2}),
		callTool("get-annotated-message", map[string]any{"messageType": "error"}),
		callTool("get-sum", map[string]any{"a": "two", "b": 3}), // invalid arguments
	}
}

// checkEverything checks the answers to listTools followed by
// everythingCalls.
func checkEverything(t *testing.T, res result) {
	t.Helper()
	if res.ServerVersion == nil || res.ServerVersion.Name != "mcp-servers/everything" {
		t.Errorf("serverVersion = %+v, want mcp-servers/everything", res.ServerVersion)
	}
	if got := toolNames(t, res.Steps[0]); !slices.Equal(got, everythingTools) {
		t.Errorf("tools = %q\nwant %q", got, everythingTools)
	}
	calls := res.Steps[1:]

	if got, want := decodeCall(t, calls[0]).text(), "Echo: héllo, troupe"; got != want {
		t.Errorf("echo: %q, want %q", got, want)
	}
	if got, want := decodeCall(t, calls[1]).text(), "The sum of 2.5 and -7 is -4.5."; got != want {
		t.Errorf("get-sum: %q, want %q", got, want)
	}

	var weather struct {
		Temperature float64 `json:"temperature"`
		Conditions  string  `json:"conditions"`
		Humidity    float64 `json:"humidity"`
	}
	decodeStructured(t, calls[2], &weather)
	if weather.Temperature != 36 || weather.Conditions != "Light rain / drizzle" || weather.Humidity != 82 {
		t.Errorf("get-structured-content: %+v", weather)
	}

	var image struct {
		Content []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Data     string `json:"data"`
			MimeType string `json:"mimeType"`
		} `json:"content"`
	}
	decodeResult(t, calls[3], &image)
	if len(image.Content) != 3 || image.Content[1].Type != "image" || image.Content[1].MimeType != "image/png" {
		t.Errorf("get-tiny-image: want text, image/png, text; got %s", calls[3].Result)
	} else if png, err := base64.StdEncoding.DecodeString(image.Content[1].Data); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG\r\n\x1a\n")) {
		t.Errorf("get-tiny-image: data is not a base64 PNG (%v)", err)
	}

	var links struct {
		Content []struct {
			Type string `json:"type"`
			URI  string `json:"uri"`
			Name string `json:"name"`
		} `json:"content"`
	}
	decodeResult(t, calls[4], &links)
	var uris []string
	for _, c := range links.Content {
		if c.Type == "resource_link" {
			uris = append(uris, c.URI)
		}
	}
	if want := []string{"demo://resource/dynamic/blob/1", "demo://resource/dynamic/text/2"}; !slices.Equal(uris, want) {
		t.Errorf("get-resource-links: resource_link uris %q, want %q", uris, want)
	}

	var annotated struct {
		Content []struct {
			Text        string `json:"text"`
			Annotations struct {
				Priority float64  `json:"priority"`
				Audience []string `json:"audience"`
			} `json:"annotations"`
		} `json:"content"`
	}
	decodeResult(t, calls[5], &annotated)
	if len(annotated.Content) != 1 || annotated.Content[0].Text != "Error: Operation failed" ||
		annotated.Content[0].Annotations.Priority != 1 || !slices.Equal(annotated.Content[0].Annotations.Audience, []string{"user", "assistant"}) {
		t.Errorf("get-annotated-message: %s", calls[5].Result)
	}

	// Arguments the tool's input schema refuses are a tool error, not a
	// JSON-RPC error, in this SDK version.
	wantMention(t, toolError(t, calls[6]), "Input validation error")
}

// toolNames are the names in a listTools step's result, in order.
func toolNames(t *testing.T, got stepResult) []string {
	t.Helper()
	var list struct {
		Tools []struct {
			Name string `json:"name"`
		} `json:"tools"`
	}
	decodeResult(t, got, &list)
	names := make([]string, 0, len(list.Tools))
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	return names
}

// sameResults requires two runs of the same steps to have given the same
// answers, step by step (JSON compared as values).
func sameResults(t *testing.T, a, b result) {
	t.Helper()
	for i := range a.Steps {
		x, y := a.Steps[i], b.Steps[i]
		if x.OK != y.OK || !jsonEqual(string(x.Result), string(y.Result)) {
			t.Errorf("step %d differs:\n%v\n%v", i, x, y)
		}
	}
}

func TestDownstreamEverythingStdio(t *testing.T) {
	command, args := everythingStdioCommand(t)
	res := runScenario(t, scenario{
		Transport: transport{Kind: "stdio", Command: command, Args: args},
		Steps:     append([]step{listTools()}, everythingCalls()...),
	})
	checkEverything(t, res)
}

// TestDownstreamEverythingHTTP runs the same steps over streamable HTTP, and
// requires the very answers stdio gave.
func TestDownstreamEverythingHTTP(t *testing.T) {
	endpoint := startEverythingHTTP(t)
	if !strings.HasPrefix(endpoint, "http://127.0.0.1:") || !strings.HasSuffix(endpoint, "/mcp") {
		t.Errorf("endpoint %s, want http://127.0.0.1:PORT/mcp", endpoint)
	}
	steps := append([]step{listTools()}, everythingCalls()...)
	overHTTP := runScenario(t, scenario{Transport: transport{Kind: "http", URL: endpoint}, Steps: steps})
	checkEverything(t, overHTTP)

	command, args := everythingStdioCommand(t)
	overStdio := runScenario(t, scenario{Transport: transport{Kind: "stdio", Command: command, Args: args}, Steps: steps})
	sameResults(t, overHTTP, overStdio)
}

// TestDownstreamEverythingProgress: trigger-long-running-operation sends one
// progress notification per step when asked for them, none otherwise.
func TestDownstreamEverythingProgress(t *testing.T) {
	command, args := everythingStdioCommand(t)
	long := map[string]any{"duration": 0.4, "steps": 4}
	withProgress := callTool("trigger-long-running-operation", long)
	withProgress.Progress = true
	res := runScenario(t, scenario{
		Transport: transport{Kind: "stdio", Command: command, Args: args},
		Steps:     []step{withProgress, callTool("trigger-long-running-operation", long)},
	})
	want := "Long running operation completed. Duration: 0.4 seconds, Steps: 4."
	for i, got := range res.Steps {
		if text := decodeCall(t, got).text(); text != want {
			t.Errorf("step %d: %q, want %q", i, text, want)
		}
	}
	// The SDK client may drop the last one, which comes with the result
	// (see downstream_servers_test.go).
	if n := res.Steps[0].ProgressCount; n < 3 || n > 4 {
		t.Errorf("with a progress token: progressCount %d, want 4 (or 3)", n)
	}
}

// TestDownstreamEverythingElicitation: a client declaring elicitation gets
// trigger-elicitation-request, which asks once and reports the answer.
func TestDownstreamEverythingElicitation(t *testing.T) {
	command, args := everythingStdioCommand(t)
	res := runScenario(t, scenario{
		Transport: transport{Kind: "stdio", Command: command, Args: args},
		Steps: []step{
			listTools(),
			callTool("trigger-elicitation-request", nil),
			callTool("trigger-elicitation-request", nil),
		},
		Elicitation: []map[string]any{
			{"action": "accept", "content": map[string]any{"name": "Ada", "check": true}},
			{"action": "decline"},
		},
	})
	want := slices.Insert(slices.Clone(everythingTools), len(everythingTools)-1, everythingElicitationTools...)
	if got := toolNames(t, res.Steps[0]); !slices.Equal(got, want) {
		t.Errorf("tools = %q\nwant %q", got, want)
	}
	if text := decodeCall(t, res.Steps[1]).text(); !strings.Contains(text, "User inputs:\n- Name: Ada\n- Agreed to terms: true") {
		t.Errorf("accepted: %q", text)
	}
	if text := decodeCall(t, res.Steps[2]).text(); !strings.Contains(text, "User declined") {
		t.Errorf("declined: %q", text)
	}
	if len(res.Elicitations) != 2 {
		t.Fatalf("%d elicitation requests, want 2", len(res.Elicitations))
	}
	var req struct {
		Message         string `json:"message"`
		RequestedSchema struct {
			Required []string `json:"required"`
		} `json:"requestedSchema"`
	}
	if err := json.Unmarshal(res.Elicitations[0], &req); err != nil {
		t.Fatal(err)
	}
	if req.Message != "Please provide inputs for the following fields:" || !slices.Equal(req.RequestedSchema.Required, []string{"name"}) {
		t.Errorf("elicitation request: %s", res.Elicitations[0])
	}
}

func TestDownstreamFilesystemStdio(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "allowed")
	writeTree(t, dir, map[string]string{
		"a.txt":       "alpha\nbeta\ngamma\n",
		"sub/b.md":    "# b\n",
		"zeta.txt":    "",
		"unicode.txt": "naïve café ✓\n",
	})
	writeTree(t, root, map[string]string{"outside.txt": "secret\n"})

	command, args := filesystemStdioCommand(t, dir)
	res := runScenario(t, scenario{
		Transport: transport{Kind: "stdio", Command: command, Args: args},
		Steps: []step{
			listTools(),
			callTool("list_allowed_directories", map[string]any{}),
			callTool("read_text_file", map[string]any{"path": filepath.Join(dir, "a.txt")}),
			callTool("read_file", map[string]any{"path": filepath.Join(dir, "unicode.txt")}),
			callTool("read_text_file", map[string]any{"path": filepath.Join(dir, "a.txt"), "head": 2}),
			callTool("list_directory", map[string]any{"path": dir}),
			callTool("list_directory_with_sizes", map[string]any{"path": dir}),
			callTool("read_text_file", map[string]any{"path": filepath.Join(root, "outside.txt")}),
			callTool("read_text_file", map[string]any{"path": "a.txt"}), // relative: to the allowed directory
		},
	})
	if res.ServerVersion == nil || res.ServerVersion.Name != "secure-filesystem-server" {
		t.Errorf("serverVersion = %+v, want secure-filesystem-server", res.ServerVersion)
	}
	if got := toolNames(t, res.Steps[0]); !slices.Equal(got, filesystemTools) {
		t.Errorf("tools = %q\nwant %q", got, filesystemTools)
	}
	// The text tools give their text twice: a text block and
	// structuredContent {"content": text}.
	text := func(i int) string {
		t.Helper()
		var out struct {
			Content string `json:"content"`
		}
		decodeTextStructured(t, res.Steps[i], &out)
		return out.Content
	}
	if got, want := text(1), "Allowed directories:\n"+dir; got != want {
		t.Errorf("list_allowed_directories: %q, want %q", got, want)
	}
	if got, want := text(2), "alpha\nbeta\ngamma\n"; got != want {
		t.Errorf("read_text_file: %q, want %q", got, want)
	}
	if got, want := text(3), "naïve café ✓\n"; got != want {
		t.Errorf("read_file: %q, want %q", got, want)
	}
	if got, want := text(4), "alpha\nbeta"; got != want {
		t.Errorf("read_text_file head 2: %q, want %q", got, want)
	}
	// list_directory is in readdir order: compare as a set.
	entries := strings.Split(text(5), "\n")
	slices.Sort(entries)
	if want := []string{"[DIR] sub", "[FILE] a.txt", "[FILE] unicode.txt", "[FILE] zeta.txt"}; !slices.Equal(entries, want) {
		t.Errorf("list_directory: %q, want %q", entries, want)
	}
	if sized := text(6); !strings.HasPrefix(sized, "[FILE] a.txt") || !strings.Contains(sized, "Total: 3 files, 1 directories") {
		t.Errorf("list_directory_with_sizes: %q", sized)
	}
	wantMention(t, toolError(t, res.Steps[7]), "Access denied - path outside allowed directories")
	if got, want := text(8), "alpha\nbeta\ngamma\n"; got != want {
		t.Errorf("read_text_file a.txt: %q, want %q", got, want)
	}
}

// TestDownstreamFilesystemCwd: a relative allowed directory resolves against
// the server's working directory, which list_allowed_directories then shows
// (a way to see a configured cwd take effect).
func TestDownstreamFilesystemCwd(t *testing.T) {
	dir := t.TempDir()
	command, args := filesystemStdioCommand(t, ".")
	res := runScenario(t, scenario{
		Transport: transport{Kind: "stdio", Command: command, Args: args, Cwd: dir},
		Steps:     []step{callTool("list_allowed_directories", map[string]any{})},
	})
	if got, want := decodeCall(t, res.Steps[0]).text(), "Allowed directories:\n"+dir; got != want {
		t.Errorf("list_allowed_directories: %q, want %q", got, want)
	}
}

// decodeTextStructured is decodeStructured for tools whose structuredContent is
// {"content": <the text block>} rather than the text block parsed as JSON.
func decodeTextStructured(t *testing.T, got stepResult, v any) {
	t.Helper()
	r := decodeCall(t, got)
	if r.IsError {
		t.Fatalf("isError = true: %s", r.text())
	}
	var sc struct {
		Content *string `json:"content"`
	}
	if err := json.Unmarshal(r.StructuredContent, &sc); err != nil || sc.Content == nil {
		t.Fatalf("structuredContent %s is not {\"content\": text} (%v)", r.StructuredContent, err)
	}
	if *sc.Content != r.text() {
		t.Errorf("structuredContent.content %q is not the text block %q", *sc.Content, r.text())
	}
	if err := json.Unmarshal(r.StructuredContent, v); err != nil {
		t.Fatalf("decoding structuredContent: %v", err)
	}
}
