package gate_test

import (
	"encoding/json"
	"strings"
	"testing"

	"troupe/gate"
	"troupe/protocol"
	"troupe/redact"
	"troupe/tools"
)

func shellSpec() tools.Spec {
	return tools.Spec{Name: "shell.exec", Description: "Runs a command.\nMore text.",
		Safety: tools.Safety{HighRisk: true, RequiresApproval: true, SandboxProfile: "default", SideEffects: []string{"filesystem"}}}
}

func TestHashBindsEverythingThatChangesTheCall(t *testing.T) {
	base := gate.Call{Spec: shellSpec(), Arguments: json.RawMessage(`{"command":["ls"],"cwd":"a"}`),
		Preview: &tools.Preview{Cwd: "a", Env: map[string]string{"X": "1"}, Command: []string{"ls"}}}
	h := gate.Hash(base)
	same := base
	same.Arguments = json.RawMessage(`{ "cwd":"a", "command":["ls"] }`) // same JSON, other spelling
	if gate.Hash(same) != h {
		t.Fatal("hash depends on JSON spelling")
	}
	for name, change := range map[string]func(*gate.Call){
		"args": func(c *gate.Call) { c.Arguments = json.RawMessage(`{"command":["rm"]}`) },
		"cwd": func(c *gate.Call) {
			c.Preview = &tools.Preview{Cwd: "b", Env: base.Preview.Env, Command: []string{"ls"}}
		},
		"env": func(c *gate.Call) {
			c.Preview = &tools.Preview{Cwd: "a", Env: map[string]string{"X": "2"}, Command: []string{"ls"}}
		},
		"profile": func(c *gate.Call) { c.Spec.Safety.SandboxProfile = "none" },
		"tool":    func(c *gate.Call) { c.Spec.Name = "other" },
	} {
		c := base
		change(&c)
		if gate.Hash(c) == h {
			t.Errorf("changing %s keeps the hash", name)
		}
	}
}

func TestTrustNeverCoversHighRisk(t *testing.T) {
	p := gate.Policy{Trust: []string{"*"}}
	if p.Trusts(shellSpec()) {
		t.Fatal("a high-risk tool is trusted by configuration")
	}
	if !p.Trusts(tools.Spec{Name: "git.status", Safety: tools.Safety{RequiresApproval: true}}) {
		t.Fatal("a trust glob does not apply")
	}
}

func TestPromptMasksSecrets(t *testing.T) {
	c := gate.Call{Spec: shellSpec(),
		Arguments: json.RawMessage(`{"command":["curl","-H","s3cr3t-value"],"api_token":"abc123456"}`),
		Preview:   &tools.Preview{Cwd: ".", Env: map[string]string{"GITHUB_TOKEN": "ghp_zzzzzz", "MODE": "x"}, Command: []string{"curl", "-H", "s3cr3t-value"}},
		Secrets:   redact.New("s3cr3t-value")}
	p := gate.Form(c, protocol.V20250618, gate.Hash(c))
	for _, leak := range []string{"s3cr3t-value", "abc123456", "ghp_zzzzzz"} {
		if strings.Contains(p.Message, leak) {
			t.Errorf("prompt shows %q:\n%s", leak, p.Message)
		}
	}
	for _, want := range []string{"shell.exec", "high risk", "Runs a command.", "GITHUB_TOKEN (secret", "MODE", "Sandbox: default", "filesystem"} {
		if !strings.Contains(p.Message, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p.Message)
		}
	}
	if strings.Contains(p.Message, "More text") {
		t.Error("prompt shows more than the description's first line")
	}
}

// TestPromptMasksDecodedArgumentsWithoutChangingThem: the form renders the
// arguments the registry decoded, masks secret-named members at any depth,
// and leaves the decoded value (which the tool runs with) as it was.
func TestPromptMasksDecodedArgumentsWithoutChangingThem(t *testing.T) {
	decoded := map[string]any{"url": "https://x", "auth": map[string]any{"password": "hunter22"}, "list": []any{map[string]any{"api_key": "k-123456"}}}
	c := gate.Call{Spec: tools.Spec{Name: "http.get"}, Arguments: json.RawMessage(`{"ignored":"because Decoded is set"}`), Decoded: decoded}
	p := gate.Form(c, protocol.V20250618, gate.Hash(c))
	for _, leak := range []string{"hunter22", "k-123456", "ignored"} {
		if strings.Contains(p.Message, leak) {
			t.Errorf("prompt shows %q:\n%s", leak, p.Message)
		}
	}
	if !strings.Contains(p.Message, `"url":"https://x"`) {
		t.Errorf("prompt lacks the url:\n%s", p.Message)
	}
	if decoded["auth"].(map[string]any)["password"] != "hunter22" || decoded["list"].([]any)[0].(map[string]any)["api_key"] != "k-123456" {
		t.Fatalf("the form changed the decoded arguments: %v", decoded)
	}
}

func TestRefusalSaysHowToAllow(t *testing.T) {
	e := gate.Refusal(tools.Spec{Name: "git.push"}, gate.Refused{Ending: gate.EndUnavailable}, gate.Policy{})
	if e.Kind != tools.KindPermissionDenied || !strings.Contains(e.Message, `approvals.trust = ["git.push"]`) {
		t.Fatalf("refusal: %+v", e)
	}
	if e := gate.Refusal(shellSpec(), unseen, gate.Policy{}); !strings.Contains(e.Message, "always asks a person") {
		t.Fatalf("high-risk refusal: %+v", e)
	}
}

// The prompt names the caller the front told apart, printable only, and
// the hash does not change with it (the state is the caller's already).
func TestPromptNamesTheCaller(t *testing.T) {
	c := gate.Call{Spec: shellSpec(), Arguments: json.RawMessage(`{"command":["ls"]}`)}
	if msg := gate.Message(c, gate.Hash(c)); strings.Contains(msg, "Asked by") {
		t.Errorf("a prompt without a caller names one: %q", msg)
	}
	named := c
	named.Caller = "token:alice\u202e"
	msg := gate.Message(named, gate.Hash(named))
	if !strings.Contains(msg, "Asked by: token:alice") || strings.ContainsRune(msg, '\u202e') {
		t.Errorf("prompt: %q", msg)
	}
	if gate.Hash(c) != gate.Hash(named) {
		t.Error("the caller changed the hash")
	}
}
