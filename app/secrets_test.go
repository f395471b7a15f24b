package app

import (
	"testing"

	"troupe/config"
)

func TestSecretValuesCoverLiteralSecrets(t *testing.T) {
	cfg, err := config.Load(config.Options{Overrides: []string{
		`mcp.x.command="true"`, `mcp.x.env={API_TOKEN="literal-token-1", MODE="plain-value"}`,
		`http.auth.bearer_token="bearer-value-2"`,
	}, Environ: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	got := Secrets(cfg).Replace("literal-token-1 bearer-value-2 plain-value")
	if got != "[redacted] [redacted] plain-value" {
		t.Fatalf("masked: %q", got)
	}
}
