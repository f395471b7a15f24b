package actors

import (
	"fmt"
	"strings"
	"testing"

	"troupe/protocol"
	"troupe/spool"
	"troupe/tools"
	"troupe/tools/command"
)

// zerosTool is a real command tool, `head -c n /dev/zero` without a
// sandbox: a program that writes n bytes.
func zerosTool(t *testing.T, name string, n int) tools.Tool {
	t.Helper()
	tl, err := command.New(command.Definition{Name: name, Description: "writes zeros", Command: "head",
		Args: []string{"-c", fmt.Sprint(n), "/dev/zero"}, SandboxProfile: "none"}, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return tl
}

// callTool runs a tool and returns its result's text and resource links.
func (c *client) callTool(id int, name string) (string, []protocol.Content) {
	c.t.Helper()
	c.request(id, "tools/call", map[string]any{"name": name})
	r := c.toolResult(c.recv())
	if r.IsError || len(r.Content) == 0 {
		c.t.Fatalf("%s: %+v", name, r)
	}
	return r.Content[0].Text, resourceLinks(r)
}

// A call that writes more than the session's spool cap keeps the cap's
// worth, and its result says so and names the key to raise.
func TestSessionSpoolCapThroughACall(t *testing.T) {
	dir := t.TempDir()
	c := newClient(t, Options{Session: SessionOptions{SpoolDir: dir,
		Spool: spool.Limits{InlineBytes: 1024, MaxStoreBytes: 100_000}}}, zerosTool(t, "zeros", 300_000))
	c.initialize("2025-06-18")
	text, links := c.callTool(1, "zeros")
	if !strings.HasPrefix(text, "[stdout: 300000 bytes; this shows the first 1024 and the last 1024 bytes; the first 100000 bytes are at troupe://output/") ||
		!strings.Contains(text, "[... 297952 bytes of stdout omitted ...]") ||
		!strings.Contains(text, "output.max_session_spool_bytes = 100000") {
		t.Fatalf("the result does not say the session cap cut the output: %q", strings.ReplaceAll(text, "\x00", ""))
	}
	if len(links) != 1 || *links[0].Size != 100_000 || !strings.Contains(links[0].Description, "max_session_spool_bytes") {
		t.Fatalf("links %+v", links)
	}
	c.request(2, "resources/read", map[string]any{"uri": links[0].URI + "?offset=99990"})
	if m := c.recv(); m.Error != nil || !strings.Contains(m.raw, `"total":100000`) {
		t.Fatalf("resources/read: %s", m.raw)
	}
}

// Sessions share the server's cap; a session that ends gives its bytes
// back.
func TestServerSpoolCapThroughCalls(t *testing.T) {
	a := newClient(t, Options{MaxTotalSpoolBytes: 150_000, Session: SessionOptions{SpoolDir: t.TempDir(),
		Spool: spool.Limits{InlineBytes: 1024}}}, zerosTool(t, "small", 100_000), zerosTool(t, "big", 300_000))
	a.initialize("2025-06-18")
	if text, links := a.callTool(1, "small"); !strings.Contains(text, "the whole stdout is at") ||
		len(links) != 1 || !strings.Contains(links[0].Description, "whole") {
		t.Fatalf("small: %q %+v", strings.ReplaceAll(text, "\x00", ""), links)
	}
	b := newClientOnHost(t, a.host)
	b.initialize("2025-06-18")
	text, links := b.callTool(1, "big")
	if !strings.Contains(text, "the first 50000 bytes are at troupe://output/") ||
		!strings.Contains(text, "output.max_total_spool_bytes = 150000") {
		t.Fatalf("the result does not say the server cap cut the output: %q", strings.ReplaceAll(text, "\x00", ""))
	}
	if len(links) != 1 || *links[0].Size != 50_000 {
		t.Fatalf("links %+v", links)
	}
	a.closeInput()
	<-a.done
	if text, _ := b.callTool(2, "small"); !strings.Contains(text, "the whole stdout is at") {
		t.Fatalf("the ended session's bytes were not given back: %q", strings.ReplaceAll(text, "\x00", ""))
	}
}
