package actors

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"
)

// updateGolden rewrites the golden files from what the code answers now.
var updateGolden = flag.Bool("update-golden", false, "rewrite actors/testdata/*.golden")

// requestStateValue matches a sealed requestState, which is fresh each
// time, so the golden files hold a placeholder in its place.
var requestStateValue = regexp.MustCompile(`"requestState":"[^"]*"`)

// checkGolden compares the whole line the client read (requestState
// masked) with testdata/name byte for byte.
func checkGolden(t *testing.T, name string, m msg) {
	t.Helper()
	got := requestStateValue.ReplaceAllString(m.raw, `"requestState":"STATE"`) + "\n"
	path := filepath.Join("testdata", name)
	if *updateGolden {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != string(want) {
		t.Fatalf("%s changed on the wire:\n got: %s\nwant: %s", name, got, want)
	}
}

// The input_required answers of an MRTR round go out byte for byte as
// they did when they were built as map literals (issue 25 made them
// protocol.InputRequiredResult): the approval's question, the same
// question asked again under the same state, and a tool's own questions.
func TestInputRequiredWireBytesUnchanged(t *testing.T) {
	var runs atomic.Int32
	c := newClient(t, Options{Session: SessionOptions{Approvals: newSealer(t)}}, askingTool{runs: &runs})
	call := func(id int, fields map[string]any) msg {
		t.Helper()
		f := map[string]any{"name": "asker", "arguments": map[string]any{"token": "a"}}
		for k, v := range fields {
			f[k] = v
		}
		c.request(id, "tools/call", modernParams(f, ""))
		return c.recv()
	}
	first := call(1, nil)
	checkGolden(t, "input_required_approval.golden", first)
	var ir inputRequired
	if err := json.Unmarshal(first.Result, &ir); err != nil || ir.RequestState == "" {
		t.Fatalf("want input_required, got %s", first.raw)
	}
	checkGolden(t, "input_required_approval_again.golden",
		call(2, map[string]any{"requestState": ir.RequestState, "inputResponses": map[string]any{}}))
	checkGolden(t, "input_required_tool_round.golden",
		call(3, map[string]any{"requestState": ir.RequestState, "inputResponses": map[string]any{
			"approval": map[string]any{"action": "accept", "content": map[string]any{"decision": "once"}}}}))
}
