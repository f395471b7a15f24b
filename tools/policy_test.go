package tools

import (
	"reflect"
	"strings"
	"testing"
)

func TestBuildAppliesPolicyAndReportsDuplicates(t *testing.T) {
	regs := []Registration{
		{Tool: obj("repo.readFile", `{"type":"object"}`), Source: "first-party"},
		{Tool: obj("repo.listDir", `{"type":"object"}`), Source: "first-party"},
		{Tool: obj("git.status", `{"type":"object"}`), Source: `config [mcp."git.status"]`},
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
	_, err = Build(append(regs, Registration{Tool: obj("git.status", `{"type":"object"}`), Source: "server downstream"}), Policy{Deny: []string{"git.*"}})
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

// A held registration is neither listed nor found, but the registry
// remembers its message for a call of it, unless the policy hides the
// name; a grant (Only) that does not allow the name hides the hold too;
// SameTools tells registries apart by what they hold and how.
func TestBuildHoldsTools(t *testing.T) {
	regs := func(held string) []Registration {
		return []Registration{
			{Tool: obj("a", `{"type":"object"}`), Source: "first-party"},
			{Tool: obj("s.b", `{"type":"object"}`), Source: "mcp_servers.s", Held: held},
			{Tool: obj("s.c", `{"type":"object"}`), Source: "mcp_servers.s", Held: "c changed"},
		}
	}
	r, err := Build(regs("b changed"), Policy{Deny: []string{"s.c"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := r.Page(0, 10)
	if r.Len() != 1 || len(page) != 1 || page[0].Name != "a" {
		t.Fatalf("listing: %+v", page)
	}
	if _, ok := r.Lookup("s.b"); ok {
		t.Fatal("Lookup finds a held tool")
	}
	if msg, ok := r.Held("s.b"); !ok || msg != "b changed" {
		t.Fatalf("Held(s.b) = %q, %v", msg, ok)
	}
	for _, name := range []string{"a", "s.c", "nope"} {
		if _, ok := r.Held(name); ok {
			t.Fatalf("Held(%s): a listed, denied or unknown tool is not held", name)
		}
	}
	if _, ok := r.Only(func(n string) bool { return n != "s.b" }).Held("s.b"); ok {
		t.Fatal("a grant that does not allow s.b still sees its hold")
	}
	if _, ok := r.Only(func(string) bool { return true }).Held("s.b"); !ok {
		t.Fatal("a grant that allows s.b does not see its hold")
	}
	same, _ := Build(regs("b changed"), Policy{Deny: []string{"s.c"}})
	other, _ := Build(regs("b changed again"), Policy{Deny: []string{"s.c"}})
	listed, _ := Build(regs(""), Policy{Deny: []string{"s.c"}})
	switch {
	case !r.SameTools(same) || !r.SameTools(r.Only(func(string) bool { return true })):
		t.Fatal("the same registry differs")
	case r.SameTools(other):
		t.Fatal("another hold message is the same registry")
	case r.SameTools(listed) || listed.SameTools(r):
		t.Fatal("a held and a listed tool are the same registry")
	}
	plain, _ := NewRegistry(obj("a", `{"type":"object"}`))
	built, _ := Build(regs("")[:1], Policy{})
	if !plain.SameTools(built) || !built.SameTools(plain) {
		t.Fatal("a built registry that holds nothing differs from NewRegistry's")
	}
	if _, err := Build(append(regs("x"), Registration{Tool: obj("s.b", `{"type":"object"}`), Source: "mcp_servers.t"}), Policy{}); err == nil {
		t.Fatal("a held and a listed tool of one name are not a duplicate")
	}
}

// A changed tool that nobody accepted needs approval at every call.
func TestUnacceptedNeedsApproval(t *testing.T) {
	for _, s := range []Safety{{Changed: []string{"description:", "+ x"}}, {ChangeSummary: "description changed"}} {
		if !s.Unaccepted() || !s.NeedsApproval() || s.Meta()[MetaRequiresApproval] != true {
			t.Fatalf("%+v does not need approval", s)
		}
	}
	if (Safety{}).Unaccepted() {
		t.Fatal("the zero Safety is unaccepted")
	}
}
