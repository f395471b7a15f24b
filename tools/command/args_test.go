package command_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"troupe/tools"
	"troupe/tools/command"
)

// Values a shell would interpret reach the program byte for byte, each in
// its own argv element: no shell ever sees them.
func TestArgumentsReachTheProgramLiterally(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	tricky := []string{
		"two words",
		`it's "quoted"`,
		"; rm -rf " + ws,
		"$(touch pwned)",
		"`touch pwned`",
		"a && touch pwned",
		"| touch pwned",
		"*",
		"~",
		"$HOME",
		"line\nbreak",
		"  leading and trailing  ",
		"",
		"--option=value",
		"ünïcødé ✓",
	}
	def := helperDef(t, []string{"{v}", "--flag={v}", "x{v}y"}, `{"type":"object","properties":{"v":{"type":"string"}},"required":["v"]}`)
	tl := newTool(t, def, ws)
	for _, v := range tricky {
		s := callSeen(t, tl, map[string]any{"v": v}, nil)
		want := []string{v, "--flag=" + v, "x" + v + "y"}
		if !slices.Equal(s.Args, want) {
			t.Errorf("value %q: argv %q, want %q", v, s.Args, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "pwned")); err == nil {
		t.Fatal("a value was run by a shell")
	}
	if _, err := os.Stat(ws); err != nil {
		t.Fatal("the workspace is gone:", err)
	}
}

// The rendering rules of the package doc, one by one.
func TestArgumentRendering(t *testing.T) {
	t.Parallel()
	schema := `{"type":"object","properties":{
		"s":{"type":"string"}, "n":{"type":"number"}, "i":{"type":"integer"}, "b":{"type":"boolean"},
		"o":{"type":"object"}, "list":{"type":"array"}, "any":{}, "opt":{"type":"string"}}}`
	tl := newTool(t, helperDef(t, []string{
		"lit", "{s}", "n={n}", "{i}", "{b}", "{o}", "{list}", "{any}", "p={any}", "{opt}", "--opt={opt}",
		"{{s}}", "{{{s}}}", "}}{{",
	}, schema), "")
	for _, c := range []struct {
		name string
		args string
		want []string
	}{
		{"scalars", `{"s":"x","n":2.50,"i":7,"b":true,"o":{"k": [1, "v"]},"list":["a b",3,false,{"z":null},[1]]}`,
			[]string{"lit", "x", "n=2.50", "7", "true", `{"k":[1,"v"]}`, "a b", "3", "false", `{"z":null}`, "[1]",
				"p=", "--opt=", "{s}", "{x}", "}{"}},
		{"numbers as written", `{"n":1e3,"i":-0}`,
			[]string{"lit", "n=1e3", "-0", "p=", "--opt=", "{s}", "{}", "}{"}},
		{"empty array adds nothing", `{"list":[]}`,
			[]string{"lit", "n=", "p=", "--opt=", "{s}", "{}", "}{"}},
		{"optional present", `{"opt":"o","b":false,"any":"free"}`,
			[]string{"lit", "n=", "false", "free", "p=free", "o", "--opt=o", "{s}", "{}", "}{"}},
		{"null is left out", `{"any":null}`,
			[]string{"lit", "n=", "p=", "--opt=", "{s}", "{}", "}{"}},
	} {
		s := callSeen(t, tl, json.RawMessage(c.args), nil)
		if !slices.Equal(s.Args, c.want) {
			t.Errorf("%s: argv %q, want %q", c.name, s.Args, c.want)
		}
	}
}

// An array can only fill a whole element; a property whose schema does
// not say "array" can still receive one, and the call is refused.
func TestArrayInsideAnElementIsRefused(t *testing.T) {
	t.Parallel()
	tl := newTool(t, helperDef(t, []string{"--file={f}"}, `{"type":"object","properties":{"f":{}}}`), "")
	_, err := call(testCtx(t, 10*time.Second), t, tl, map[string]any{"f": []string{"a", "b"}}, nil)
	te := wantToolError(t, err, tools.KindInvalidArgument)
	if !strings.Contains(te.Message, `"f" is an array`) {
		t.Fatalf("message %q", te.Message)
	}
	// A scalar in the same place is fine.
	if s := callSeen(t, tl, map[string]any{"f": "a"}, nil); !slices.Equal(s.Args, []string{"--file=a"}) {
		t.Fatalf("argv %q", s.Args)
	}
}

func TestNULCannotBePassed(t *testing.T) {
	t.Parallel()
	tl := newTool(t, helperDef(t, []string{"{v}"}, `{"type":"object","properties":{"v":{}}}`), "")
	// (In an object, NUL is escaped as \u0000 by the JSON rendering.)
	for _, v := range []any{"a\x00b", []string{"ok", "\x00"}} {
		_, err := call(testCtx(t, 10*time.Second), t, tl, map[string]any{"v": v}, nil)
		te := wantToolError(t, err, tools.KindInvalidArgument)
		if !strings.Contains(te.Message, "NUL") {
			t.Fatalf("message %q", te.Message)
		}
	}
}

// stdin is the arguments as validated, then closed.
func TestStdinCarriesTheArguments(t *testing.T) {
	t.Parallel()
	tl := newTool(t, command.Definition{
		Name: "cat", Command: "cat",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"},"n":{"type":"integer"}}}`),
	}, "")
	args := `{"q": "héllo \"x\"", "n": 3}`
	out := callText(t, tl, json.RawMessage(args), nil)
	if want, _ := json.Marshal(json.RawMessage(args)); out != string(want) {
		t.Fatalf("stdin %q, want %s", out, want)
	}
	// No arguments at all: stdin is {}.
	out = callText(t, tl, nil, nil)
	if out != "{}" {
		t.Fatalf("stdin %q, want {}", out)
	}
}

// A program that never reads stdin, given more than a pipe holds, still
// finishes: nothing waits for the write.
func TestUnreadStdinDoesNotBlock(t *testing.T) {
	t.Parallel()
	tl := newTool(t, command.Definition{
		Name: "true", Command: "true",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"big":{"type":"string"}}}`),
	}, "")
	start := time.Now()
	out := callText(t, tl, map[string]string{"big": strings.Repeat("x", 1<<20)}, nil)
	if out != "" || time.Since(start) > 3*time.Second {
		t.Fatalf("output %q after %s", out, time.Since(start))
	}
}
