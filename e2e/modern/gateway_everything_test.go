package modern

import (
	"encoding/json"
	"os/exec"
	"regexp"
	"testing"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// server-everything's prompts, resources and completions reach a go-sdk
// client speaking 2026-07-28 through troupe (over stdio and HTTP) exactly as
// the same library gets them from the server directly (which speaks the
// session-based revisions: the direct client connects at 2025-11-25), but
// for the prompts' names, which carry the server's prefix through troupe,
// and the clock time server-everything writes into its dynamic resources
// (compared with the time masked, blobs decoded: byte for byte otherwise).
func TestGatewayServerEverythingToAStatelessClient(t *testing.T) {
	cfg := writeConfig(t, everythingTable(t, ""))

	// What the go-sdk client gets from server-everything directly.
	direct := gosdk.NewClient(&gosdk.Implementation{Name: "troupe-e2e-direct", Version: "1.0.0"}, nil)
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	cmd := exec.Command(node, everythingEntry(t), "stdio")
	cmd.Env = serverEnv()
	ds, err := direct.Connect(ctxFor(t), &gosdk.CommandTransport{Command: cmd, TerminateDuration: stopTimeout},
		&gosdk.ClientSessionOptions{ProtocolVersion: legacyVersion})
	if err != nil {
		t.Fatalf("connecting to server-everything directly: %v", err)
	}
	t.Cleanup(func() { _ = ds.Close() })

	prompts := []*gosdk.GetPromptParams{
		{Name: "simple-prompt"},
		{Name: "args-prompt", Arguments: map[string]string{"city": "Zürich", "state": "ZH"}},
	}
	uris := []string{"demo://resource/static/document/architecture.md", "demo://resource/dynamic/text/3", "demo://resource/dynamic/blob/5"}
	complete := &gosdk.CompleteParams{Ref: &gosdk.CompleteReference{Type: "ref/prompt", Name: "completable-prompt"},
		Argument: gosdk.CompleteParamsArgument{Name: "department", Value: "S"}}
	asJSON := func(v any) string {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	want := map[string]string{}
	for _, p := range prompts {
		res, err := ds.GetPrompt(ctxFor(t), p)
		if err != nil {
			t.Fatalf("direct prompts/get %s: %v", p.Name, err)
		}
		want["prompt "+p.Name] = asJSON(res.Messages)
	}
	for _, u := range uris {
		res, err := ds.ReadResource(ctxFor(t), &gosdk.ReadResourceParams{URI: u})
		if err != nil {
			t.Fatalf("direct resources/read %s: %v", u, err)
		}
		want["read "+u] = asJSON(untimed(t, res.Contents))
	}
	res, err := ds.Complete(ctxFor(t), complete)
	if err != nil {
		t.Fatalf("direct completion/complete: %v", err)
	}
	want["complete"] = asJSON(res.Completion)

	forEachTransportWith(t, []string{"--config", cfg}, func(t *testing.T, fx fixture, tg *target) {
		client := gosdk.NewClient(&gosdk.Implementation{Name: "troupe-e2e-gateway", Version: "1.0.0"}, nil)
		cs := connectWith(t, tg, client, "")
		if v := cs.InitializeResult().ProtocolVersion; v != modernVersion {
			t.Fatalf("negotiated %q, want %q", v, modernVersion)
		}
		for _, p := range prompts {
			res, err := cs.GetPrompt(ctxFor(t), &gosdk.GetPromptParams{Name: "everything." + p.Name, Arguments: p.Arguments})
			if err != nil {
				t.Fatalf("prompts/get %s through troupe: %v (troupe's log:\n%s)", p.Name, err, tg.log)
			}
			if got := asJSON(res.Messages); got != want["prompt "+p.Name] {
				t.Errorf("prompts/get %s:\n through troupe %s\n directly       %s", p.Name, got, want["prompt "+p.Name])
			}
		}
		for _, u := range uris {
			res, err := cs.ReadResource(ctxFor(t), &gosdk.ReadResourceParams{URI: u})
			if err != nil {
				t.Fatalf("resources/read %s through troupe: %v (troupe's log:\n%s)", u, err, tg.log)
			}
			if got := asJSON(untimed(t, res.Contents)); got != want["read "+u] {
				t.Errorf("resources/read %s:\n through troupe %s\n directly       %s", u, got, want["read "+u])
			}
		}
		c := *complete
		c.Ref = &gosdk.CompleteReference{Type: "ref/prompt", Name: "everything.completable-prompt"}
		res, err := cs.Complete(ctxFor(t), &c)
		if err != nil {
			t.Fatalf("completion/complete through troupe: %v (troupe's log:\n%s)", err, tg.log)
		}
		if got := asJSON(res.Completion); got != want["complete"] {
			t.Errorf("completion/complete:\n through troupe %s\n directly       %s", got, want["complete"])
		}
	})
}

// clock is the time of day server-everything writes into its dynamic
// resources ("created at 3:59:53 PM").
var clock = regexp.MustCompile(`\d{1,2}:\d{2}:\d{2}\s?[AP]M`)

// untimed is contents with the clock time masked in texts and blobs (the
// SDK decodes blobs to bytes).
func untimed(t *testing.T, contents []*gosdk.ResourceContents) []gosdk.ResourceContents {
	t.Helper()
	out := make([]gosdk.ResourceContents, 0, len(contents))
	for _, c := range contents {
		m := *c
		m.Text = clock.ReplaceAllString(m.Text, "<time>")
		if len(m.Blob) > 0 {
			m.Blob = []byte(clock.ReplaceAllString(string(m.Blob), "<time>"))
		}
		out = append(out, m)
	}
	return out
}
