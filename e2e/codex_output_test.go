package e2e

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// What Codex 0.169.0 keeps of a tool result, measured with this scripted
// model (see ../shared/notes/codex-client.md): about 12,000 bytes of text
// over the whole output (bytes, not characters: a text of two-byte
// characters is cut at the same byte count), the first and last ~5,980
// bytes of the item that crosses the limit with "…N tokens truncated…"
// between them, and every later content block replaced by
// "[omitted N text items ...]". troupe's default head and tail (16 KB
// each) lost the note saying where the whole output is, and its
// resource_link.

// codexOutputConfig gives troupe a command tool with 588,895 bytes of
// output (seq 100000).
const codexOutputConfig = `
[mcp.numbers]
command = "seq"
args = ["100000"]
description = "Prints the numbers from 1 to 100000."
side_effects = []
requires_approval = false

`

// codexRangeRE finds the range a result's note offers to read next.
var codexRangeRE = regexp.MustCompile(`e\.g\. (troupe://output/[^?\s]+\?offset=(\d+)&length=(\d+))\]`)

// TestCodexSeesWhereLargeOutputIs: through the real Codex, a large output
// arrives whole as troupe shaped it (nothing cut by Codex), starting with
// the note that says where the rest is; the model reads the next range
// with Codex's read_mcp_resource; repo.readFile's default read arrives
// uncut and the model reads the file on by nextOffset and by lines.
func TestCodexSeesWhereLargeOutputIs(t *testing.T) {
	codexBinary(t)
	fx := newFixture(t)
	var big strings.Builder
	for i := 1; i <= 3000; i++ {
		fmt.Fprintf(&big, "row %04d %s\n", i, strings.Repeat("ab", i%30))
	}
	file := big.String()
	writeTree(t, fx.dir, map[string]string{"big.txt": file})
	cfg := filepath.Join(t.TempDir(), "troupe.toml")
	if err := os.WriteFile(cfg, []byte(codexOutputConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	servers := fmt.Sprintf("[mcp_servers.troupe]\ncommand = %q\nargs = [\"serve\", \"--workspace\", %q, \"--config\", %q]\nenv = { XDG_STATE_HOME = %q }\n",
		troupeBinary(t), fx.dir, cfg, stateHome)
	var seq strings.Builder
	for i := 1; i <= 100000; i++ {
		fmt.Fprintf(&seq, "%d\n", i)
	}
	numbers := seq.String()

	waits := 0
	model := newScriptedModel(t, func(req modelRequest) modelItem {
		if _, ok := req.namespace("mcp__troupe"); !ok {
			waits++
			return functionCall(fmt.Sprintf("call_wait_%d", waits), "", "wait_for_tools", map[string]any{})
		}
		done := req.outputs()
		next := []struct {
			id   string
			item func() modelItem
		}{
			{"call_11000", func() modelItem {
				return functionCall("call_11000", "mcp__troupe", "repo_readFile", map[string]any{"path": "big.txt", "maxBytes": 11000})
			}},
			{"call_13000", func() modelItem {
				return functionCall("call_13000", "mcp__troupe", "repo_readFile", map[string]any{"path": "big.txt", "maxBytes": 13000})
			}},
			{"call_numbers", func() modelItem { return functionCall("call_numbers", "mcp__troupe", "numbers", map[string]any{}) }},
			{"call_resource", func() modelItem {
				m := codexRangeRE.FindStringSubmatch(outputText(done["call_numbers"]))
				uri := "troupe://output/none"
				if m != nil {
					uri = m[1]
				}
				return functionCall("call_resource", "", "read_mcp_resource", map[string]any{"server": "troupe", "uri": uri})
			}},
			{"call_read", func() modelItem {
				return functionCall("call_read", "mcp__troupe", "repo_readFile", map[string]any{"path": "big.txt"})
			}},
			{"call_read_on", func() modelItem {
				var r struct{ NextOffset int64 }
				_, js, _ := strings.Cut(outputText(done["call_read"]), "Output:\n")
				json.Unmarshal([]byte(js), &r)
				return functionCall("call_read_on", "mcp__troupe", "repo_readFile", map[string]any{"path": "big.txt", "offset": r.NextOffset})
			}},
			{"call_lines", func() modelItem {
				return functionCall("call_lines", "mcp__troupe", "repo_readFile", map[string]any{"path": "big.txt", "startLine": 1000, "endLine": 1002})
			}},
		}
		for _, c := range next {
			if _, ok := done[c.id]; !ok {
				return c.item()
			}
		}
		return message("done")
	})
	runCodex(t, model, fx.dir, servers, "read large output")
	model.mu.Lock()
	last := model.requests[len(model.requests)-1].outputs()
	model.mu.Unlock()
	out := func(id string) string {
		t.Helper()
		raw, ok := last[id]
		if !ok {
			t.Fatalf("no function_call_output for %s", id)
		}
		return outputText(raw)
	}
	uncut := func(t *testing.T, what, s string) {
		t.Helper()
		if strings.Contains(s, "tokens truncated") || strings.Contains(s, "[omitted") {
			t.Errorf("Codex cut %s:\n%s", what, s)
		}
	}

	t.Run("Codex keeps about 12,000 bytes of a result", func(t *testing.T) {
		// If this fails, Codex changed its limit: revisit the defaults
		// (output.inline_bytes, repo.readFile's maxBytes, the excerpts).
		uncut(t, "a result of 11,400 bytes", out("call_11000"))
		if s := out("call_13000"); !strings.Contains(s, "tokens truncated") || len(s) > 12100 {
			t.Errorf("Codex did not cut a result of 13,400 bytes (%d arrived)", len(s))
		}
	})
	t.Run("a large output starts with where the rest is, and Codex cuts nothing", func(t *testing.T) {
		s := out("call_numbers")
		uncut(t, "the output", s)
		_, text, _ := strings.Cut(s, "Output:\n")
		wantAll(t, "numbers", text,
			"[stdout: 588895 bytes; this shows the first 2048 and the last 2048 bytes; the whole stdout is at troupe://output/",
			numbers[:2048]+"\n[... 584799 bytes of stdout omitted ...]\n"+numbers[len(numbers)-2048:],
			`"type":"resource_link"`)
		if !strings.HasPrefix(text, "[stdout: ") {
			t.Errorf("the note is not first:\n%.300s", text)
		}
	})
	t.Run("the model reads the next range with read_mcp_resource", func(t *testing.T) {
		s := out("call_resource")
		uncut(t, "the range", s)
		// The range's text, JSON-encoded inside Codex's rendering of the result.
		piece, _ := json.Marshal(numbers[2048 : 2048+8192])
		if !strings.Contains(s, strings.Trim(string(piece), `"`)) {
			t.Errorf("read_mcp_resource did not return bytes 2048..10240:\n%.600s", s)
		}
	})
	t.Run("repo.readFile by default fits, and reads on by nextOffset and lines", func(t *testing.T) {
		type result struct {
			Offset, NextOffset, StartLine, EndLine, NextLine int64
			Truncated                                        bool
			Content                                          string
		}
		get := func(id string) result {
			s := out(id)
			uncut(t, id, s)
			_, js, _ := strings.Cut(s, "Output:\n")
			var r result
			if err := json.Unmarshal([]byte(js), &r); err != nil {
				t.Fatalf("%s: %v in\n%.300s", id, err, s)
			}
			return r
		}
		if r := get("call_read"); r.Content != file[:8192] || !r.Truncated || r.NextOffset != 8192 {
			t.Errorf("default read: %d bytes, truncated %v, nextOffset %d", len(r.Content), r.Truncated, r.NextOffset)
		}
		if r := get("call_read_on"); r.Offset != 8192 || r.Content != file[8192:16384] {
			t.Errorf("read on: offset %d, %d bytes", r.Offset, len(r.Content))
		}
		start := strings.Index(file, "row 1000 ")
		end := strings.Index(file, "row 1003 ")
		if r := get("call_lines"); r.Content != file[start:end] || r.StartLine != 1000 || r.EndLine != 1002 || r.NextLine != 1003 {
			t.Errorf("lines 1000-1002: %+v", r)
		}
	})
}
