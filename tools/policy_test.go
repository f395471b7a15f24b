package tools

import (
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
