package tools

import (
	"strings"
	"testing"
)

// The expected names are what the real Codex 0.169 showed the model
// (../shared/notes/codex-client.md, "Tool names as the model sees them").
func TestCodexVisibleNamesMatchCodex(t *testing.T) {
	got := CodexVisibleNames("fx", []string{"dup.x", "dup_x", "plain", "kebab-case-tool", strings.Repeat("a", 80)})
	want := map[string]string{
		"dup.x": "dup_x_52ac6dfba137", "dup_x": "dup_x_69e938530463", "plain": "plain",
		"kebab-case-tool": "kebab_case_tool", strings.Repeat("a", 80): strings.Repeat("a", 80),
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%q: got %q, want %q", k, got[k], v)
		}
	}
	if got := CodexVisibleNames("troupe", []string{"greet-x", "greet_x"})["greet-x"]; got != "greet_x_00de2a408362" {
		t.Errorf("greet-x: got %q", got)
	}
	long := strings.Repeat("b", 128)
	if got := CodexVisibleNames("fx", []string{long})[long]; len(got) != 119 || !strings.HasPrefix(got, strings.Repeat("b", 106)+"_") {
		t.Errorf("128-char name with server fx: got %q (%d chars), want 119 chars", got, len(got))
	}
	server := strings.Repeat("s", 60)
	name := strings.Repeat("c", 80)
	if got := CodexVisibleNames(server, []string{name})[name]; len(got) != 61 {
		t.Errorf("80-char name with a 60-char server: got %d chars, want 61", len(got))
	}
}
