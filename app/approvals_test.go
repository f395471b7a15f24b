package app

import (
	"bytes"
	"encoding/base64"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"troupe/config"
	"troupe/gate/approvalstate"
)

// Two processes configured with the same approvals.state_key open each
// other's states, and a rotated-in key still opens the old one's; without
// a key each process has its own, and troupe logs (at info when it serves
// HTTP) that several processes need a shared key.
func TestApprovalStatesFromConfig(t *testing.T) {
	dir := t.TempDir()
	key := func(c byte) string { return base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{c}, 32)) }
	loadWith := func(file string, env ...string) *config.Config {
		t.Helper()
		p := filepath.Join(dir, "troupe.toml")
		if err := os.WriteFile(p, []byte(file), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := config.Load(config.Options{File: p, Environ: append([]string{"HOME=" + dir}, env...)})
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	sealer := func(cfg *config.Config) (*approvalstate.Sealer, string) {
		t.Helper()
		var logs bytes.Buffer
		s, err := newApprovalStates(cfg, slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo})))
		if err != nil {
			t.Fatal(err)
		}
		return s, logs.String()
	}
	b := approvalstate.Binding{Tool: "shell.exec", Hash: strings.Repeat("ab", 32), Caller: approvalstate.CredentialCaller([32]byte{7})}
	seal := func(s *approvalstate.Sealer) string {
		st, err := s.Seal(approvalstate.Request{Binding: b, Offer: approvalstate.OfferFor(b.Caller)})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}

	shared := loadWith("[approvals]\nstate_key = \"${TROUPE_STATE_KEY}\"\ntimeout = \"1m\"\n[http]\nlisten = \"127.0.0.1:0\"\n", "TROUPE_STATE_KEY="+key('a'))
	one, logs := sealer(shared)
	two, _ := sealer(shared)
	if logs != "" {
		t.Errorf("with a key configured troupe logs: %s", logs)
	}
	if one.TTL() != shared.Approvals.Timeout {
		t.Errorf("states live %s, approvals.timeout is %s", one.TTL(), shared.Approvals.Timeout)
	}
	if _, err := two.Open(seal(one), b); err != nil {
		t.Fatalf("a process with the same key: %v", err)
	}
	rotated, _ := sealer(loadWith("[approvals]\nstate_key = \""+key('b')+"\"\nprevious_state_keys = [\"${OLD}\"]\n", "OLD="+key('a')))
	if _, err := rotated.Open(seal(one), b); err != nil {
		t.Fatalf("the previous key during a rotation: %v", err)
	}

	generatedHTTP := loadWith("[http]\nlisten = \"127.0.0.1:0\"\n")
	own, logs := sealer(generatedHTTP)
	if logs != "" { // one process is the usual server: no news at info (issue 24)
		t.Errorf("without a key, serving HTTP, the log at info says: %q", logs)
	}
	other, _ := sealer(generatedHTTP)
	if _, err := other.Open(seal(own), b); !errors.Is(err, approvalstate.ErrUnknownKey) {
		t.Fatalf("another process's generated key: %v", err)
	}
	if _, logs := sealer(loadWith("")); logs != "" {
		t.Errorf("over stdio the generated key is no news at info: %q", logs)
	}
}
