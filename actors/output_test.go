package actors

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"troupe/protocol"
	"troupe/spool"
	"troupe/tools"
)

// chattyTool writes n bytes to its stdout, then blocks until cancelled
// (when block is set) or returns. It stands for a program-running tool: a
// Previewer, which is what gets an output spool.
func chattyTool(name string, n int, block bool, timeout time.Duration) tools.Tool {
	return programTool{safetyTool{funcTool: funcTool{name: name, call: func(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
		for i := 0; i < n; i += 10 {
			fmt.Fprintf(req.Output.Stdout, "%09d\n", i)
		}
		if block {
			<-ctx.Done()
			return nil, ctx.Err()
		}
		return textResult(req.Output.Stdout.Text()), nil
	}}, safety: tools.Safety{Timeout: timeout}}}
}

// programTool is a tool that runs programs, as far as troupe can tell: it
// previews its calls.
type programTool struct{ safetyTool }

func (programTool) Preview(*tools.Request) (*tools.Preview, error) {
	return &tools.Preview{Cwd: "."}, nil
}

type safetyTool struct {
	funcTool
	safety tools.Safety
}

func (s safetyTool) Spec() tools.Spec {
	spec := s.funcTool.Spec()
	spec.Safety = s.safety
	return spec
}

func resourceLinks(r protocol.CallToolResult) []protocol.Content {
	var out []protocol.Content
	for _, c := range r.Content {
		if c.Type == "resource_link" {
			out = append(out, c)
		}
	}
	return out
}

// At its deadline a call answers with the output so far and a link to
// all of it; the client's own shorter deadline wins over the tool's.
func TestDeadlineAnswersWithPartialOutput(t *testing.T) {
	c := newClient(t, Options{Session: SessionOptions{SpoolDir: t.TempDir(), Spool: spool.Limits{InlineBytes: 1024}}},
		chattyTool("slow", 100_000, true, time.Minute))
	c.initialize("2025-06-18")
	c.request(1, "tools/call", map[string]any{"name": "slow", "_meta": map[string]any{"dev.troupe/timeoutMs": 300}})
	r := c.toolResult(c.recv())
	text := errorText(r)
	if !r.IsError || !strings.Contains(text, "deadline_exceeded") || !strings.Contains(text, "300ms") ||
		!strings.Contains(text, "000099990") {
		t.Fatalf("deadline result: %s", text)
	}
	links := resourceLinks(r)
	if len(links) != 1 || !strings.HasPrefix(links[0].URI, "troupe://output/") {
		t.Fatalf("links %+v", links)
	}
	// The whole output can be read back, in ranges.
	c.request(2, "resources/read", map[string]any{"uri": links[0].URI + "?length=20"})
	m := c.recv()
	var rr protocol.ReadResourceResult
	if err := json.Unmarshal(m.Result, &rr); err != nil || len(rr.Contents) != 1 || *rr.Contents[0].Text != "000000000\n000000010\n" {
		t.Fatalf("resources/read: %s", m.raw)
	}
	c.request(3, "resources/list", nil)
	if m := c.recv(); !strings.Contains(string(m.Result), links[0].URI) {
		t.Fatalf("resources/list: %s", m.raw)
	}
	// Another session cannot read it.
	other := newClientOnHost(t, c.host)
	other.initialize("2025-06-18")
	other.request(1, "resources/read", map[string]any{"uri": links[0].URI})
	if m := other.recv(); m.Error == nil || m.Error.Code != protocol.CodeResourceNotFound {
		t.Fatalf("another session read the output: %s", m.raw)
	}
}

// A result that shows all of the output has no link; one that does not
// links it.
func TestLinksOnlyForCutOutput(t *testing.T) {
	c := newClient(t, Options{Session: SessionOptions{SpoolDir: t.TempDir(), Spool: spool.Limits{InlineBytes: 1024}}},
		chattyTool("small", 100, false, 0), chattyTool("big", 100_000, false, 0))
	c.initialize("2025-11-25")
	c.request(1, "tools/call", map[string]any{"name": "small"})
	if r := c.toolResult(c.recv()); r.IsError || len(resourceLinks(r)) != 0 {
		t.Fatalf("small: %+v", r)
	}
	c.request(2, "tools/call", map[string]any{"name": "big"})
	if r := c.toolResult(c.recv()); r.IsError || len(resourceLinks(r)) != 1 {
		t.Fatalf("big: %+v", r)
	}
}
