package config

import (
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"testing"
)

// approvals.state_key and previous_state_keys: ${VAR} references resolve,
// the values are recorded as secrets (literal ones too), masked in the
// effective config and in errors, and validated with errors that say what
// a key must be without showing it.
func TestApprovalStateKeys(t *testing.T) {
	cur := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	prev := hex.EncodeToString([]byte(strings.Repeat("p", 32)))
	file := writeConfig(t, `
[approvals]
state_key = "${STATE_KEY}"
previous_state_keys = ["`+prev+`"]
`)
	c, err := load(t, file, []string{"STATE_KEY=" + cur})
	if err != nil {
		t.Fatal(err)
	}
	if c.Approvals.StateKey != cur || !slices.Equal(c.Approvals.PreviousStateKeys, []string{prev}) {
		t.Fatalf("keys: %q %q", c.Approvals.StateKey, c.Approvals.PreviousStateKeys)
	}
	if !slices.Contains(c.Secrets, cur) || !slices.Contains(c.Secrets, prev) {
		t.Fatalf("the keys are not recorded as secrets")
	}
	out, err := c.Effective()
	if err != nil {
		t.Fatal(err)
	}
	if text := string(out); strings.Contains(text, cur) || strings.Contains(text, prev) ||
		!strings.Contains(text, "${STATE_KEY}") || !strings.Contains(text, "<redacted>") {
		t.Fatalf("the effective config shows a key or hides the reference:\n%s", text)
	}

	if c, err := load(t, "", nil); err != nil || c.Approvals.StateKey != "" || len(c.Approvals.PreviousStateKeys) != 0 {
		t.Fatalf("defaults: %v %+v", err, c.Approvals)
	}

	short := base64.StdEncoding.EncodeToString([]byte("sixteen-byte-key"))
	for _, tc := range []struct {
		name, file string
		env        []string
		want       string
	}{
		{"short key", "[approvals]\nstate_key = \"" + short + "\"\n", nil, "approvals.state_key: must be 32 bytes, got 16"},
		{"a passphrase", "[approvals]\nstate_key = \"${PASS}\"\n", []string{"PASS=correct horse battery"},
			"approvals.state_key = \"${PASS}\": is neither base64 nor hex"},
		{"unset variable", "[approvals]\nstate_key = \"${NOPE}\"\n", []string{}, "NOPE, which is not set"},
		{"bad previous key", "[approvals]\nstate_key = \"" + cur + "\"\nprevious_state_keys = [\"" + short + "\"]\n", nil,
			"approvals.previous_state_keys[0] must be 32 bytes"},
		{"previous repeats current", "[approvals]\nstate_key = \"" + cur + "\"\nprevious_state_keys = [\"" +
			hex.EncodeToString([]byte(strings.Repeat("k", 32))) + "\"]\n", nil, "repeats state_key"},
		{"previous without current", "[approvals]\nprevious_state_keys = [\"" + prev + "\"]\n", nil, "without approvals.state_key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := append([]string{"HOME=" + t.TempDir()}, tc.env...)
			_, err := load(t, writeConfig(t, tc.file), env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
			for _, secret := range []string{short, "correct horse", cur, prev} {
				if strings.Contains(err.Error(), secret) {
					t.Fatalf("the error shows a key: %v", err)
				}
			}
		})
	}
}
