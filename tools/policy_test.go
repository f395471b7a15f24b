package tools

import (
	"reflect"
	"strings"
	"testing"
)

func TestBuildAppliesPolicyAndReportsDuplicates(t *testing.T) {
	regs := []Registration{
		{obj("repo.readFile", `{"type":"object"}`), "first-party"},
		{obj("repo.listDir", `{"type":"object"}`), "first-party"},
		{obj("git.status", `{"type":"object"}`), `config [mcp."git.status"]`},
	}
	r, err := Build(regs, Policy{Allow: []string{"*"}, Deny: []string{"repo.list*"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("repo.listDir"); ok || r.Len() != 2 {
		t.Fatalf("deny did not hide repo.listDir: %d tools", r.Len())
	}
	r, _ = Build(regs, Policy{Allow: []string{"git.*"}})
	if r.Len() != 1 {
		t.Fatalf("allow should keep only git.*: %d", r.Len())
	}
	_, err = Build(append(regs, Registration{obj("git.status", `{"type":"object"}`), "server downstream"}), Policy{Deny: []string{"git.*"}})
	if err == nil || !strings.Contains(err.Error(), `config [mcp."git.status"]`) || !strings.Contains(err.Error(), "server downstream") {
		t.Fatalf("a duplicate must name both sources, hidden or not: %v", err)
	}
}

func TestCodexNameWarnings(t *testing.T) {
	if CodexName("repo.readFile") != "repo_readFile" || CodexName("ünïcödé") != "_n_c_d_" {
		t.Fatal(CodexName("repo.readFile"))
	}
	if w := CodexNameWarnings("troupe", []string{"repo_readFile", "repo.listDir"}); len(w) != 0 {
		t.Fatalf("no warnings expected: %v", w)
	}
	w := CodexNameWarnings("troupe", []string{"dup.x", "dup_x", strings.Repeat("a", 130)})
	if len(w) != 2 || !strings.Contains(strings.Join(w, "\n"), `"dup.x", "dup_x"`) || !strings.Contains(strings.Join(w, "\n"), "over its 128") {
		t.Fatalf("warnings: %v", w)
	}
}

func TestMayMatchUnder(t *testing.T) {
	for _, c := range []struct {
		pattern, prefix string
		want            bool
	}{
		{"*", "fs.", true},
		{"fs.*", "fs.", true},
		{"f*", "fs.", true},
		{"fs*", "fs.", true},
		{"fs.writeFile", "fs.", true},
		{"fs.", "fs.", false}, // the name goes on after the prefix
		{"fs", "fs.", false},
		{"repo.*", "fs.", false},
		{"hel?o", "fs.", false},
		{"?s.x", "fs.", true},
		{"[a-f]s.*", "fs.", true},
		{"[^f]s.*", "fs.", false},
		{`fs\.*`, "fs.", true},
		{"*.exec", "shell.", true},
		{"[", "fs.", false}, // malformed: matches nothing
	} {
		if got := MayMatchUnder(c.pattern, c.prefix); got != c.want {
			t.Errorf("MayMatchUnder(%q, %q) = %v, want %v", c.pattern, c.prefix, got, c.want)
		}
	}
}

func TestPolicyExplain(t *testing.T) {
	p := Policy{Allow: []string{"*"}, Deny: []string{"fs.*", "nothing"}}
	got := p.Explain([]string{"repo.readFile", "fs.writeFile"}, []string{"fs.", "everything."})
	want := []PatternMatch{
		{List: "allow", Pattern: "*", Tools: []string{"fs.writeFile", "repo.readFile"}, Prefixes: []string{"fs.", "everything."}},
		{List: "deny", Pattern: "fs.*", Tools: []string{"fs.writeFile"}, Prefixes: []string{"fs."}},
		{List: "deny", Pattern: "nothing"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Explain:\n got %+v\nwant %+v", got, want)
	}
}
