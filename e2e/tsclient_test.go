package e2e

import (
	"bytes"
	"encoding/json"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestTSClientStdio runs the first-party tool checks through the TypeScript
// SDK over stdio. TestTSClientHTTP runs the same table over streamable HTTP:
// one table, both transports, so a client cannot tell them apart.
func TestTSClientStdio(t *testing.T) {
	fx := newFixture(t)
	runChecks(t, stdioTransport(t, fx.dir), toolChecks(fx))
}

// TestTSClientStdioBuiltinSearch runs the same checks with no rg on PATH,
// where repo.ripgrep falls back to its built-in search: a client must not
// be able to tell the two apart.
func TestTSClientStdioBuiltinSearch(t *testing.T) {
	fx := newFixture(t)
	tr := stdioTransport(t, fx.dir)
	tr.Env = serverEnv(map[string]string{"PATH": t.TempDir()})
	runChecks(t, tr, toolChecks(fx))
}

// TestTSClientHTTP runs the stdio checks over streamable HTTP, against
// `troupe serve --http` on a loopback port.
func TestTSClientHTTP(t *testing.T) {
	requireRunner(t) // skip before building a binary nothing would run
	fx := newFixture(t)
	srv := startHTTPServer(t, fx.dir, "")
	runChecks(t, srv.transport(), toolChecks(fx))
}

// TestTSClientHTTPBearer runs the same checks against a server that requires
// a bearer token, which the SDK sends on every request.
func TestTSClientHTTPBearer(t *testing.T) {
	requireRunner(t)
	fx := newFixture(t)
	srv := startHTTPServer(t, fx.dir, newToken(t))
	runChecks(t, srv.transport(), toolChecks(fx))
}

// TestTSClientHTTPWithoutToken: a client without the right token cannot
// even initialize, and the SDK tells its user why.
func TestTSClientHTTPWithoutToken(t *testing.T) {
	requireRunner(t)
	fx := newFixture(t)
	srv := startHTTPServer(t, fx.dir, newToken(t))
	for _, tc := range []struct {
		name, authorization string
	}{
		{"no Authorization", ""},
		{"wrong token", "Bearer " + newToken(t)},
		{"token in another scheme", "Token " + srv.token},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := transport{Kind: "http", URL: srv.url}
			if tc.authorization != "" {
				tr.Headers = map[string]string{"Authorization": tc.authorization}
			}
			run := execRunner(t, scenario{Transport: tr, Steps: []step{listTools()}})
			if code := run.exitCode(); code != runnerCannotConnect {
				t.Fatalf("runner exited with %d, want %d (cannot connect); stdout: %s\nstderr: %s",
					code, runnerCannotConnect, run.stdout, run.stderr)
			}
			if !strings.Contains(run.stderr, "401") && !strings.Contains(run.stderr, "Unauthorized") {
				t.Errorf("the runner's error mentions neither 401 nor Unauthorized:\n%s", run.stderr)
			}
		})
	}
	// And it was troupe's authentication that said no.
	if n := strings.Count(srv.log.String(), "http request refused status=401"); n < 3 {
		t.Errorf("troupe logged %d refusals with status 401, want one per client at least", n)
	}
}

// A check is one step of a session with troupe and what its answer must
// satisfy. Checks run in table order within one session, so a listTools
// check first makes the SDK validate every later structuredContent against
// the tool's outputSchema.
type check struct {
	name string
	step step
	want func(t *testing.T, got stepResult)
}

// runChecks runs checks as one scenario over tr, then asserts each answer in
// its own subtest, and the session facts every transport must agree on.
func runChecks(t *testing.T, tr transport, checks []check, answers ...map[string]any) {
	t.Helper()
	sc := scenario{Transport: tr, Elicitation: answers}
	for _, c := range checks {
		sc.Steps = append(sc.Steps, c.step)
	}
	res := runScenario(t, sc)

	if res.ServerVersion == nil || res.ServerVersion.Name == "" {
		t.Errorf("serverVersion = %+v, want a name", res.ServerVersion)
	}
	if res.ProtocolVersion == "" {
		t.Errorf("no protocol version was negotiated")
	}
	for i, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if t.Failed() {
					t.Logf("step: %+v\nanswer: %v", c.step, res.Steps[i])
				}
			}()
			c.want(t, res.Steps[i])
		})
	}
}

// The first-party tools' names.
const (
	listDir  = "repo.listDir"
	readFile = "repo.readFile"
	ripgrep  = "repo.ripgrep"
)

// toolChecks is the behaviour of the first-party tools on fx, as a client
// sees it.
func toolChecks(fx fixture) []check {
	return []check{
		{"tools/list", listTools(), func(t *testing.T, got stepResult) {
			var out struct {
				Tools []toolInfo `json:"tools"`
			}
			decodeResult(t, got, &out)
			byName := map[string]toolInfo{}
			for _, tool := range out.Tools {
				if _, dup := byName[tool.Name]; dup {
					t.Errorf("tool %q listed twice", tool.Name)
				}
				byName[tool.Name] = tool
			}
			for _, name := range []string{listDir, readFile, ripgrep} {
				tool, ok := byName[name]
				if !ok {
					t.Errorf("tool %q not listed; got %v", name, slices.Sorted(maps.Keys(byName)))
					continue
				}
				if tool.InputSchema["type"] != "object" {
					t.Errorf("%s: inputSchema.type = %v, want object", name, tool.InputSchema["type"])
				}
				if tool.OutputSchema["type"] != "object" {
					t.Errorf("%s: outputSchema.type = %v, want object", name, tool.OutputSchema["type"])
				}
				// openWorldHint defaults to true, so false must be said.
				a := tool.Annotations
				if a == nil || a.ReadOnlyHint == nil || !*a.ReadOnlyHint || a.OpenWorldHint == nil || *a.OpenWorldHint {
					t.Errorf("%s: annotations = %s, want readOnlyHint true and openWorldHint false", name, jsonString(a))
				}
			}
		}},

		{"listDir root", callTool(listDir, map[string]any{"path": "."}), func(t *testing.T, got stepResult) {
			var out listDirOutput
			decodeStructured(t, got, &out)
			if out.Truncated {
				t.Errorf("truncated = true for a small directory")
			}
			readme := out.entry("README.md")
			if readme == nil || readme.Type != "file" {
				t.Errorf("README.md: entry %s, want a file", jsonString(readme))
			} else if readme.SizeBytes != nil && *readme.SizeBytes != int64(len(fx.readme)) {
				t.Errorf("README.md: sizeBytes = %d, want %d", *readme.SizeBytes, len(fx.readme))
			}
			for _, dir := range []string{"src", "docs"} {
				if e := out.entry(dir); e == nil || e.Type != "dir" {
					t.Errorf("%s: entry %s, want a dir", dir, jsonString(e))
				}
			}
		}},
		{"listDir nested", callTool(listDir, map[string]any{"path": "src/nested"}), func(t *testing.T, got stepResult) {
			var out listDirOutput
			decodeStructured(t, got, &out)
			if len(out.Entries) != 1 || out.Entries[0].Name != "deep" || out.Entries[0].Type != "dir" {
				t.Errorf("entries = %s, want just the dir deep", jsonString(out.Entries))
			}
		}},
		{"listDir maxEntries", callTool(listDir, map[string]any{"path": ".", "maxEntries": 1}), func(t *testing.T, got stepResult) {
			var out listDirOutput
			decodeStructured(t, got, &out)
			if len(out.Entries) != 1 || !out.Truncated {
				t.Errorf("got %d entries, truncated %v; want 1 entry, truncated", len(out.Entries), out.Truncated)
			}
		}},

		{"readFile", callTool(readFile, map[string]any{"path": "README.md"}), func(t *testing.T, got stepResult) {
			var out readFileOutput
			decodeStructured(t, got, &out)
			if out.Content != fx.readme || out.Truncated {
				t.Errorf("content %q, truncated %v; want %q, not truncated", out.Content, out.Truncated, fx.readme)
			}
			if out.Path != "README.md" {
				t.Errorf("path = %q, want README.md", out.Path)
			}
		}},
		{"readFile maxBytes", callTool(readFile, map[string]any{"path": "README.md", "maxBytes": 6}), func(t *testing.T, got stepResult) {
			var out readFileOutput
			decodeStructured(t, got, &out)
			if out.Content != fx.readme[:6] || !out.Truncated {
				t.Errorf("content %q, truncated %v; want %q, truncated", out.Content, out.Truncated, fx.readme[:6])
			}
		}},
		{"readFile missing", callTool(readFile, map[string]any{"path": "missing.txt"}), func(t *testing.T, got stepResult) {
			text := toolError(t, got)
			wantMention(t, text, "missing.txt")
			wantNoLeak(t, text, fx)
		}},

		{"ripgrep", callTool(ripgrep, map[string]any{"query": fx.needle}), func(t *testing.T, got stepResult) {
			var out ripgrepOutput
			decodeStructured(t, got, &out)
			found := false
			for _, m := range out.Matches {
				if m.FilePath == fx.needleFile {
					found = true
					if m.LineNumber != fx.needleLine || strings.TrimRight(m.LineText, "\r\n") != fx.needleText {
						t.Errorf("match %s, want line %d %q", jsonString(m), fx.needleLine, fx.needleText)
					}
				}
				if m.FilePath == fx.ignoredFile || strings.HasPrefix(m.FilePath, "build/") || filepath.IsAbs(m.FilePath) {
					t.Errorf("match %s: ignored by .gitignore, or not workspace-relative", jsonString(m))
				}
			}
			if !found {
				t.Errorf("no match in %s; matches %s", fx.needleFile, jsonString(out.Matches))
			}
		}},
		{"ripgrep globs", callTool(ripgrep, map[string]any{"query": fx.needle, "globs": []string{"*.md"}}), func(t *testing.T, got stepResult) {
			var out ripgrepOutput
			decodeStructured(t, got, &out)
			if len(out.Matches) != 1 || out.Matches[0].FilePath != "docs/guide.md" {
				t.Errorf("matches %s, want just docs/guide.md", jsonString(out.Matches))
			}
		}},
		{"ripgrep maxMatches", callTool(ripgrep, map[string]any{"query": fx.needle, "maxMatches": 1}), func(t *testing.T, got stepResult) {
			var out ripgrepOutput
			decodeStructured(t, got, &out)
			if len(out.Matches) != 1 || !out.Truncated {
				t.Errorf("got %d matches, truncated %v; want 1 match, truncated", len(out.Matches), out.Truncated)
			}
		}},

		// Ways out of the workspace. The answer must be an error that shows
		// neither the host's paths nor what lies outside.
		{"readFile dot-dot", callTool(readFile, map[string]any{"path": "../secret.txt"}), func(t *testing.T, got stepResult) {
			wantNoLeak(t, toolError(t, got), fx)
		}},
		{"readFile symlink out", callTool(readFile, map[string]any{"path": "escape"}), func(t *testing.T, got stepResult) {
			wantNoLeak(t, toolError(t, got), fx)
		}},
		{"readFile absolute outside", callTool(readFile, map[string]any{"path": filepath.Join(fx.root, "secret.txt")}), func(t *testing.T, got stepResult) {
			// The client named the host path itself, so only the secret
			// must stay hidden.
			if text := toolError(t, got); strings.Contains(text, strings.TrimSpace(fx.secret)) {
				t.Errorf("error text reveals the file outside the workspace: %q", text)
			}
		}},
		{"listDir dot-dot", callTool(listDir, map[string]any{"path": ".."}), func(t *testing.T, got stepResult) {
			wantNoLeak(t, toolError(t, got), fx)
		}},
		{"ripgrep glob dot-dot", callTool(ripgrep, map[string]any{"query": "secret", "globs": []string{"../*"}}), func(t *testing.T, got stepResult) {
			// Whether refused or run, it must not see past the workspace.
			r := decodeCall(t, got)
			if text := r.text(); strings.Contains(text, strings.TrimSpace(fx.secret)) || strings.Contains(text, fx.root) {
				t.Errorf("answer reveals what is outside the workspace: %q", text)
			}
		}},

		// Invalid arguments are tool errors that name the offending field,
		// so a model can correct itself.
		{"readFile maxBytes not a number", callTool(readFile, map[string]any{"path": "README.md", "maxBytes": "x"}), func(t *testing.T, got stepResult) {
			wantMention(t, toolError(t, got), "maxBytes")
		}},
		{"ripgrep without query", callTool(ripgrep, map[string]any{"globs": []string{"*.go"}}), func(t *testing.T, got stepResult) {
			wantMention(t, toolError(t, got), "query")
		}},
		{"listDir maxEntries not a number", callTool(listDir, map[string]any{"path": ".", "maxEntries": "all"}), func(t *testing.T, got stepResult) {
			wantMention(t, toolError(t, got), "maxEntries")
		}},
		{"unknown tool", callTool("repo.noSuchTool", map[string]any{}), func(t *testing.T, got stepResult) {
			wantMention(t, toolError(t, got), "repo.noSuchTool")
		}},
	}
}

// toolInfo is the part of a tools/list entry the checks look at.
type toolInfo struct {
	Name         string         `json:"name"`
	InputSchema  map[string]any `json:"inputSchema"`
	OutputSchema map[string]any `json:"outputSchema"`
	Annotations  *struct {
		ReadOnlyHint  *bool `json:"readOnlyHint"`
		OpenWorldHint *bool `json:"openWorldHint"`
	} `json:"annotations"`
}

type listDirOutput struct {
	Entries   []dirEntry `json:"entries"`
	Truncated bool       `json:"truncated"`
}

type dirEntry struct {
	Name      string `json:"name"`
	Type      string `json:"type"` // "file" or "dir"
	SizeBytes *int64 `json:"sizeBytes"`
}

// entry returns the entry called name, or nil.
func (o *listDirOutput) entry(name string) *dirEntry {
	for i := range o.Entries {
		if o.Entries[i].Name == name {
			return &o.Entries[i]
		}
	}
	return nil
}

type readFileOutput struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated"`
}

type ripgrepOutput struct {
	Matches []struct {
		FilePath   string `json:"filePath"`
		LineNumber int    `json:"lineNumber"`
		LineText   string `json:"lineText"`
	} `json:"matches"`
	Truncated bool `json:"truncated"`
}

// callResult is a tools/call result.
type callResult struct {
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StructuredContent json.RawMessage `json:"structuredContent"`
	IsError           bool            `json:"isError"`
}

// text joins the result's text blocks.
func (r callResult) text() string {
	var parts []string
	for _, c := range r.Content {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// decodeResult requires the step to have succeeded and decodes its result.
func decodeResult(t *testing.T, got stepResult, v any) {
	t.Helper()
	if !got.OK {
		t.Fatalf("step failed: %v", got)
	}
	if err := json.Unmarshal(got.Result, v); err != nil {
		t.Fatalf("decoding result: %v", err)
	}
}

// decodeCall requires a tools/call step to have produced a result (a tool
// error is a result; a JSON-RPC error is not).
func decodeCall(t *testing.T, got stepResult) callResult {
	t.Helper()
	var r callResult
	decodeResult(t, got, &r)
	return r
}

// decodeStructured requires a successful tool result whose structuredContent
// is also given, as the same JSON, in a text block, and decodes it into v.
// The SDK has already checked it against the tool's outputSchema.
func decodeStructured(t *testing.T, got stepResult, v any) {
	t.Helper()
	r := decodeCall(t, got)
	if r.IsError {
		t.Fatalf("isError = true: %s", r.text())
	}
	if len(r.StructuredContent) == 0 {
		t.Fatalf("no structuredContent")
	}
	if len(r.Content) == 0 || !jsonEqual(r.Content[0].Text, string(r.StructuredContent)) {
		t.Errorf("first content block %s is not structuredContent %s", jsonString(r.Content), r.StructuredContent)
	}
	if err := json.Unmarshal(r.StructuredContent, v); err != nil {
		t.Fatalf("decoding structuredContent: %v", err)
	}
}

// toolError requires a tool error result and returns its text.
func toolError(t *testing.T, got stepResult) string {
	t.Helper()
	r := decodeCall(t, got)
	if !r.IsError {
		t.Fatalf("isError = false, want a tool error; result %s", got.Result)
	}
	text := r.text()
	if text == "" {
		t.Errorf("tool error has no text")
	}
	return text
}

func wantMention(t *testing.T, text, want string) {
	t.Helper()
	if !strings.Contains(text, want) {
		t.Errorf("error text %q does not mention %q", text, want)
	}
}

// wantNoLeak requires text to name no host path of the fixture and not to
// carry the secret kept outside the workspace.
func wantNoLeak(t *testing.T, text string, fx fixture) {
	t.Helper()
	roots := []string{fx.root}
	if real, err := filepath.EvalSymlinks(fx.root); err == nil && real != fx.root {
		roots = append(roots, real)
	}
	for _, root := range roots {
		if strings.Contains(text, root) {
			t.Errorf("error text reveals the host path %s: %q", root, text)
		}
	}
	if strings.Contains(text, strings.TrimSpace(fx.secret)) {
		t.Errorf("error text reveals the file outside the workspace: %q", text)
	}
}

func jsonEqual(a, b string) bool {
	var va, vb any
	if json.Unmarshal([]byte(a), &va) != nil || json.Unmarshal([]byte(b), &vb) != nil {
		return false
	}
	ca, _ := json.Marshal(va)
	cb, _ := json.Marshal(vb)
	return bytes.Equal(ca, cb)
}

func jsonString(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
