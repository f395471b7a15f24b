package gate_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"troupe/gate"
	"troupe/protocol"
	"troupe/tools"
)

// hidden lists, per class, characters a prompt must never show raw, with
// the escape the person sees instead.
var hidden = []struct {
	class, raw, shown string
}{
	{"Cc escape", "\x1b", `\u001b`},
	{"Cc bell", "\a", `\u0007`},
	{"Cc delete", "\x7f", `\u007f`},
	{"Cc tab", "\t", `\t`},
	{"Cc carriage return", "\r", `\r`},
	{"Cc newline", "\n", `\n`},
	{"Cc C1 next line", "\u0085", `\u0085`},
	{"Cc C1 CSI", "\u009b", `\u009b`},
	{"Cf right-to-left override", "\u202e", `\u202e`},
	{"Cf left-to-right embedding", "\u202a", `\u202a`},
	{"Cf pop directional formatting", "\u202c", `\u202c`},
	{"Cf right-to-left isolate", "\u2067", `\u2067`},
	{"Cf pop directional isolate", "\u2069", `\u2069`},
	{"Cf left-to-right mark", "\u200e", `\u200e`},
	{"Cf right-to-left mark", "\u200f", `\u200f`},
	{"Cf arabic letter mark", "\u061c", `\u061c`},
	{"Cf zero width space", "\u200b", `\u200b`},
	{"Cf zero width non-joiner", "\u200c", `\u200c`},
	{"Cf zero width joiner", "\u200d", `\u200d`},
	{"Cf word joiner", "\u2060", `\u2060`},
	{"Cf byte order mark", "\ufeff", `\ufeff`},
	{"Cf soft hyphen", "\u00ad", `\u00ad`},
	{"Cf mongolian vowel separator", "\u180e", `\u180e`},
	{"Cf tag letter", "\U000e0041", `\U000e0041`},
	{"Cf cancel tag", "\U000e007f", `\U000e007f`},
	{"Co private use", "\ue000", `\ue000`},
	{"Co supplementary private use", "\U000f0000", `\U000f0000`},
	{"Cn unassigned", "\u0378", `\u0378`},
	{"invalid UTF-8 byte", "\xff", `\xff`},
	{"encoded surrogate (Cs)", "\xed\xa0\x80", `\xed\xa0\x80`},
	{"Zl line separator", "\u2028", `\u2028`},
	{"Zp paragraph separator", "\u2029", `\u2029`},
	{"Zs no-break space", "\u00a0", `\u00a0`},
	{"Zs em space", "\u2003", `\u2003`},
	{"Zs hair space", "\u200a", `\u200a`},
	{"Zs narrow no-break space", "\u202f", `\u202f`},
	{"Zs ideographic space", "\u3000", `\u3000`},
	{"Zs ogham space mark", "\u1680", `\u1680`},
	{"ignorable hangul filler", "\u3164", `\u3164`},
	{"ignorable hangul choseong filler", "\u115f", `\u115f`},
	{"ignorable halfwidth hangul filler", "\uffa0", `\uffa0`},
	{"ignorable combining grapheme joiner", "\u034f", `\u034f`},
	{"variation selector", "\ufe0f", `\ufe0f`},
	{"supplementary variation selector", "\U000e0100", `\U000e0100`},
}

// disguised is a call whose every shown field carries s: the tool's name,
// description and side effects (a downstream server chooses them), the
// argv, working directory, environment and arguments (the model chooses
// them).
func disguised(s string) gate.Call {
	field := "a" + s + "b"
	argv := []string{"rm", "-rf", field}
	args, _ := json.Marshal(map[string]any{"command": argv, "cwd": field, "env": map[string]string{field: "1"}})
	return gate.Call{
		Spec: tools.Spec{Name: "tool" + field, Description: "Does " + field,
			Safety: tools.Safety{RequiresApproval: true, SandboxProfile: "default", SideEffects: []string{field}}},
		Arguments: args,
		Preview:   &tools.Preview{Cwd: field, Env: map[string]string{field: "1"}, Command: argv},
	}
}

// shownTexts is everything a client may put in front of the person.
func shownTexts(t *testing.T, p *protocol.ElicitRequestParams) map[string]string {
	t.Helper()
	texts := map[string]string{"message": p.Message}
	field, _ := p.RequestedSchema.Properties["decision"].(map[string]any)
	texts["field description"], _ = field["description"].(string)
	switch one := field["oneOf"].(type) {
	case []map[string]string:
		for _, o := range one {
			texts["choice "+o["const"]] = o["title"]
		}
	default:
		names, _ := field["enumNames"].([]string)
		for i, n := range names {
			texts["choice "+string(rune('0'+i))] = n
		}
	}
	return texts
}

// TestPromptEscapesInvisibleCharacters is the attack: characters that
// reorder, hide or fake text (bidi overrides, zero-width characters,
// unusual spaces, line separators, invalid bytes) in any field of a call
// reach the person only as visible escapes, and never add a line.
func TestPromptEscapesInvisibleCharacters(t *testing.T) {
	plain := disguised("")
	plainLines := strings.Count(gate.Message(plain, gate.Hash(plain)), "\n")
	for _, v := range []protocol.Version{protocol.V20250618, protocol.V20251125} {
		for _, h := range hidden {
			t.Run(string(v)+"/"+h.class, func(t *testing.T) {
				c := disguised(h.raw)
				p := gate.Form(c, v, gate.Hash(c))
				for name, text := range shownTexts(t, p) {
					if !utf8.ValidString(text) {
						t.Errorf("%s is not valid UTF-8: %q", name, text)
					}
					if h.raw != "\n" && strings.Contains(text, h.raw) {
						t.Errorf("%s shows %q raw: %q", name, h.raw, text)
					}
				}
				if n := strings.Count(p.Message, "\n"); n != plainLines {
					t.Errorf("message has %d line breaks, want %d:\n%s", n, plainLines, p.Message)
				}
				// Every field shows the escape where the character was: the
				// name, description, side effects, cwd and environment name,
				// the argv, and the arguments' command, cwd and env (the
				// description shows its first line only; JSON arguments
				// cannot carry bytes that are not UTF-8: decoding makes them
				// U+FFFD, for the tool as for the person).
				want := 9
				switch {
				case h.raw == "\n":
					want = 8
				case !utf8.ValidString(h.raw):
					want = 6
				}
				if got := strings.Count(p.Message, "a"+h.shown+"b"); got != want {
					t.Errorf("message shows %q in %d places, want %d:\n%s", "a"+h.shown+"b", got, want, p.Message)
				}
			})
		}
	}
}

// TestPromptFakeLine checks that a newline in an argv element, the working
// directory or an environment name cannot make the prompt show a line of
// the attacker's choosing.
func TestPromptFakeLine(t *testing.T) {
	const forged = `Command: ["ls"]`
	for name, preview := range map[string]*tools.Preview{
		"cwd":  {Cwd: "x\n" + forged + "\nWorking directory: x", Command: []string{"rm", "-rf", "/"}},
		"env":  {Cwd: ".", Env: map[string]string{"X\n" + forged + "\nY": "1"}, Command: []string{"rm", "-rf", "/"}},
		"argv": {Cwd: ".", Command: []string{"rm", "-rf", "/", "\n" + forged + "\n"}},
	} {
		c := gate.Call{Spec: shellSpec(), Arguments: json.RawMessage(`{}`), Preview: preview}
		msg := gate.Message(c, gate.Hash(c))
		for _, line := range strings.Split(msg, "\n") {
			if line == forged {
				t.Errorf("%s: the prompt shows a forged line:\n%s", name, msg)
			}
		}
	}
}

// TestPromptKeepsPrintableText checks that what people write — accents,
// other scripts, combining marks, emoji, shell syntax — is shown as it is.
func TestPromptKeepsPrintableText(t *testing.T) {
	for _, s := range []string{"café", "e\u0301", "日本語", "Ωmega", "😀", "€ ß", "x && y > z < w | v"} {
		c := disguised(s)
		msg := gate.Message(c, gate.Hash(c))
		want := "a" + s + "b"
		if got := strings.Count(msg, want); got != 9 {
			t.Errorf("%q shown %d times, want 9:\n%s", want, got, msg)
		}
	}
	// A backslash is itself in plain fields and escaped inside the quoted
	// strings of the command and arguments, where it could otherwise start
	// an escape.
	c := disguised(`\u202e`)
	msg := gate.Message(c, gate.Hash(c))
	if plain, quoted := strings.Count(msg, `a\u202eb`), strings.Count(msg, `a\\u202eb`); plain != 5 || quoted != 4 {
		t.Errorf("a literal backslash: %d plain, %d quoted, want 5 and 4:\n%s", plain, quoted, msg)
	}
}

// TestPrintable checks the rule itself, class by class.
func TestPrintable(t *testing.T) {
	for _, h := range hidden {
		if got, want := gate.Printable("a"+h.raw+"b"), "a"+h.shown+"b"; got != want {
			t.Errorf("%s: Printable(%q) = %q, want %q", h.class, "a"+h.raw+"b", got, want)
		}
	}
	for _, s := range []string{"", "plain ascii ~!@#$%^&*()_+", `back\slash "quotes"`, "café e\u0301", "日本語", "😀", "\ufffd"} {
		if got := gate.Printable(s); got != s {
			t.Errorf("Printable(%q) = %q, want it unchanged", s, got)
		}
	}
}

// shownSafely reports the first rune of text a person should not see raw.
func shownSafely(text string) (bad rune, ok bool) {
	if !utf8.ValidString(text) {
		return utf8.RuneError, false
	}
	for _, r := range text {
		if r != '\n' && (!unicode.IsPrint(r) || unicode.Is(unicode.Other_Default_Ignorable_Code_Point, r) ||
			unicode.Is(unicode.Variation_Selector, r)) {
			return r, false
		}
	}
	return 0, true
}

// FuzzPrompt puts arbitrary text in every field of a call: the prompt
// keeps its lines and shows nothing a person cannot see.
func FuzzPrompt(f *testing.F) {
	for _, h := range hidden {
		f.Add(h.raw, "x")
	}
	f.Add("\n"+`Command: ["ls"]`, `\u202e`)
	f.Fuzz(func(t *testing.T, s, u string) {
		c := disguised(s + u)
		c.Spec.Name += s
		p := gate.Form(c, protocol.V20251125, gate.Hash(c))
		plain := disguised("")
		if got, want := strings.Count(p.Message, "\n"), strings.Count(gate.Message(plain, gate.Hash(plain)), "\n"); got != want {
			t.Fatalf("%d line breaks, want %d:\n%s", got, want, p.Message)
		}
		for name, text := range shownTexts(t, p) {
			if r, ok := shownSafely(text); !ok {
				t.Fatalf("%s shows %U raw: %q", name, r, text)
			}
		}
		if r, ok := shownSafely(gate.Printable(s)); !ok || strings.Contains(gate.Printable(s), "\n") {
			t.Fatalf("Printable(%q) shows %U raw", s, r)
		}
	})
}
