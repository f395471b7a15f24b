package modern

// A 2026-07-28 downstream server's prompts and resources through troupe
// (the gateway), for clients of both eras (go-sdk): the prompt as the
// server gives it (its embedded blob included) and its binary resource
// byte for byte, as a client connected to the server directly gets them.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	gosdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// statelessBlob is internal/statelessserver's binary resource.
var statelessBlob = []byte{0x00, 0xff, 0xfe, 0x80, 'M', 'C', 'P', 0xc3, 0x28, 0x0a}

func TestGatewayModernServerPromptsAndResources(t *testing.T) {
	bin := statelessServer(t)
	cfg := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf("[mcp_servers.modern]\ncommand = %q\n\n[limits]\nmcp_servers_startup_wait = \"15s\"\n", bin)), 0o600); err != nil {
		t.Fatal(err)
	}
	direct, err := gosdk.NewClient(&gosdk.Implementation{Name: "direct", Version: "1"}, nil).
		Connect(ctxFor(t), &gosdk.CommandTransport{Command: exec.Command(bin), TerminateDuration: stopTimeout}, nil)
	if err != nil {
		t.Fatalf("connecting to the server directly: %v", err)
	}
	t.Cleanup(func() { _ = direct.Close() })
	wantPrompt, err := direct.GetPrompt(ctxFor(t), &gosdk.GetPromptParams{Name: "brief", Arguments: map[string]string{"topic": "caches"}})
	if err != nil {
		t.Fatal(err)
	}
	wantRead, err := direct.ReadResource(ctxFor(t), &gosdk.ReadResourceParams{URI: "stateless://blob"})
	if err != nil {
		t.Fatal(err)
	}
	promptJSON, readJSON := hopFree(t, wantPrompt), hopFree(t, wantRead)

	forEachTransportWith(t, []string{"--config", cfg}, func(t *testing.T, fx fixture, tg *target) {
		for _, version := range []string{"", legacyVersion} {
			t.Run("client "+map[string]string{"": modernVersion}[version]+version, func(t *testing.T) {
				cs := connectAnswering(t, tg, version, &answerer{})
				list, err := cs.ListPrompts(ctxFor(t), nil)
				if err != nil {
					t.Fatalf("prompts/list: %v", err)
				}
				found := false
				for _, p := range list.Prompts {
					found = found || p.Name == "modern.brief" && len(p.Arguments) == 1 && p.Arguments[0].Name == "topic"
				}
				if !found {
					t.Errorf("prompts/list lacks modern.brief: %+v", list.Prompts)
				}
				got, err := cs.GetPrompt(ctxFor(t), &gosdk.GetPromptParams{Name: "modern.brief", Arguments: map[string]string{"topic": "caches"}})
				if err != nil {
					t.Fatalf("prompts/get: %v", err)
				}
				if b := hopFree(t, got); !bytes.Equal(b, promptJSON) {
					t.Errorf("prompts/get:\n via    %s\n direct %s", b, promptJSON)
				}
				read, err := cs.ReadResource(ctxFor(t), &gosdk.ReadResourceParams{URI: "stateless://blob"})
				if err != nil {
					t.Fatalf("resources/read: %v", err)
				}
				if b := hopFree(t, read); !bytes.Equal(b, readJSON) || len(read.Contents) != 1 || !bytes.Equal(read.Contents[0].Blob, statelessBlob) {
					t.Errorf("resources/read:\n via    %s\n direct %s", b, readJSON)
				}
			})
		}
	})
}

// hopFree is result as JSON without what belongs to the hop that carried
// it (_meta, resultType and the cache hint, which troupe sets for its own
// hop and a session-based client never gets).
func hopFree(t *testing.T, result any) []byte {
	t.Helper()
	b, err := json.Marshal(result)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"_meta", "resultType", "ttlMs", "cacheScope"} {
		delete(m, k)
	}
	b, _ = json.Marshal(m)
	return b
}
