package repo

import (
	"bytes"
	"context"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"troupe/tools"
)

func TestRuleMatching(t *testing.T) {
	type probe struct {
		path  string
		isDir bool
		want  verdict
	}
	cases := []struct {
		lines  string
		probes []probe
	}{
		{"*.log\n!keep.log", []probe{
			{"a.log", false, matchedPositive}, {"d/e/a.log", false, matchedPositive},
			{"keep.log", false, matchedNegated}, {"d/keep.log", false, matchedNegated}, {"a.txt", false, noMatch},
		}},
		// Anchoring: a leading or inner slash ties the pattern to the
		// ignore file's directory.
		{"/root.txt\na/b", []probe{
			{"root.txt", false, matchedPositive}, {"d/root.txt", false, noMatch},
			{"a/b", false, matchedPositive}, {"x/a/b", false, noMatch}, {"a/b/c", false, noMatch},
		}},
		// Dir-only patterns pass over files.
		{"build/", []probe{{"build", true, matchedPositive}, {"build", false, noMatch}, {"x/build", true, matchedPositive}}},
		// "**" in all three places, with backtracking.
		{"**/gen/*.go\ndocs/**/*.tmp\ndeep/**/x/y", []probe{
			{"gen/a.go", false, matchedPositive}, {"a/b/gen/a.go", false, matchedPositive}, {"gen/sub/a.go", false, noMatch},
			{"docs/a.tmp", false, matchedPositive}, {"docs/a/b/c.tmp", false, matchedPositive}, {"x/docs/a.tmp", false, noMatch},
			{"deep/x/y", false, matchedPositive}, {"deep/x/x/y", false, matchedPositive}, {"deep/x/y/z", false, noMatch},
		}},
		// "a/**" is what is inside a, not a itself.
		{"a/**", []probe{{"a", true, noMatch}, {"a/b", false, matchedPositive}, {"a/b/c", false, matchedPositive}}},
		// The whitelist idiom: ignore everything but directories and Go
		// files. go-git alone would re-include a/readme via "!*/".
		{"*\n!*/\n!*.go", []probe{
			{"a", true, matchedNegated}, {"a/readme", false, matchedPositive}, {"a/b.go", false, matchedNegated},
		}},
		// rg's extensions: alternatives, classes, "**" inside a name.
		{"*.{bak,orig}\n[!a]bc\nx**y", []probe{
			{"f.bak", false, matchedPositive}, {"f.orig", false, matchedPositive}, {"f.{bak,orig}", false, noMatch},
			{"xbc", false, matchedPositive}, {"abc", false, noMatch},
			{"xy", false, matchedPositive}, {"xaay", false, matchedPositive},
		}},
		// Escapes, trailing spaces, comments, "!" alone.
		{"\\#hash\n\\!bang\ntrail   \n# comment\nsp\\ ", []probe{
			{"#hash", false, matchedPositive}, {"!bang", false, matchedPositive}, {"trail", false, matchedPositive},
			{"# comment", false, noMatch}, {"sp ", false, matchedPositive},
		}},
		{"!", []probe{{"anything", false, matchedNegated}, {"a/b", true, matchedNegated}}},
		{"/", []probe{{"anything", false, noMatch}}},
		// "?" is one byte, as in rg.
		{"?", []probe{{"a", false, matchedPositive}, {"é", false, noMatch}}},
		{"??", []probe{{"é", false, matchedPositive}}},
	}
	for _, tc := range cases {
		rs := parseRuleSet(tc.lines + "\n")
		for _, p := range tc.probes {
			if got := rs.match(p.path, p.isDir); got != p.want {
				t.Errorf("rules %q, path %q (dir %v): got %v, want %v", tc.lines, p.path, p.isDir, got, p.want)
			}
		}
	}
	if parseRuleSet("# only a comment\n\n   \n") != nil {
		t.Error("a file of comments should have no rules")
	}
}

func TestParseGlobs(t *testing.T) {
	for _, bad := range []string{"[", "[a", "a\\", "{a", "{a,{b}}", "[!]", "[z-a]", "*{"} {
		if _, err := parseGlobs([]string{bad}); err == nil {
			t.Errorf("glob %q: no error", bad)
		}
	}
	for _, good := range []string{"[]a]", "[a-]", "[--a]", "a}", "{}", "{,a}", "***", "[{]", "\\{a,b}"} {
		if _, err := parseGlobs([]string{good}); err != nil {
			t.Errorf("glob %q: %v", good, err)
		}
	}
	rs, err := parseGlobs([]string{"#comment"})
	if err != nil || rs != nil {
		t.Errorf("a comment glob: %v %v", rs, err)
	}
	rs, err = parseGlobs([]string{"*.go", "!vendor/", "!*_test.go"})
	if err != nil || rs.positives != 1 || len(rs.rules) != 3 {
		t.Fatalf("%+v %v", rs, err)
	}
	if got := rs.match("a/b_test.go", false); got != matchedNegated {
		t.Errorf("the last matching glob should win: %v", got)
	}
	alts, err := expandBraces("{a,b}/{c,d}")
	if err != nil || !reflect.DeepEqual(alts, []string{"a/c", "a/d", "b/c", "b/d"}) {
		t.Errorf("expandBraces: %q %v", alts, err)
	}
	if _, err := expandBraces(strings.Repeat("{a,b,c}", 8)); err == nil {
		t.Error("6561 alternatives should be refused")
	}
}

func TestUTF8Cut(t *testing.T) {
	s := []byte("a€b") // € is bytes 1..3
	for n, want := range []int{0, 1, 1, 1, 4, 5} {
		if got := tools.UTF8Cut(s, n); got != want {
			t.Errorf("tools.UTF8Cut(%q, %d) = %d, want %d", s, n, got, want)
		}
	}
	// Bad bytes can be cut anywhere.
	if got := tools.UTF8Cut([]byte("a\xff\xff\xffb"), 3); got != 3 {
		t.Errorf("cut among bad bytes: %d", got)
	}
	if got := cleanLine([]byte(strings.Repeat("é", 1500) + "\r\n")); got != strings.Repeat("é", 1000) {
		t.Errorf("cleanLine of a long line: %d bytes", len(got))
	}
	if got := cleanLine([]byte("x\xffy\r\n")); got != "x\uFFFDy" {
		t.Errorf("cleanLine: %q", got)
	}
	if got := cleanLine([]byte("x\r\r\n")); got != "x\r" {
		t.Errorf("cleanLine strips one CR: %q", got)
	}
}

// newTestWalk is a walk without a workspace, for the line-level code.
func newTestWalk(pattern string, max int) *walk {
	re := regexp.MustCompile(pattern)
	w := &walk{ctx: context.Background(), req: &tools.Request{}, q: &query{pattern: pattern, re: re}, c: &collector{max: max}}
	if p, _ := re.LiteralPrefix(); p != "" {
		w.prefix = []byte(p)
	}
	return w
}

// TestStream checks the path for files past 64 MiB on smaller input:
// chunk boundaries, a NUL at the start and a NUL further on.
func TestStream(t *testing.T) {
	var b bytes.Buffer
	b.WriteString(utf8BOM)
	for i := range 120000 {
		if i%997 == 0 {
			b.WriteString("needle " + strings.Repeat("n", i%50) + "\r\n")
		} else {
			b.WriteString(strings.Repeat("x", i%23) + "\n")
		}
	}
	b.WriteString("needle at the end, unterminated")
	data := b.Bytes()
	if len(data) < streamChunk+streamChunk/4 {
		t.Fatalf("only %d bytes; lines must cross a chunk boundary", len(data))
	}

	for _, pattern := range []string{"needle", "(?i)NEEDLE", "^$"} {
		whole := newTestWalk(pattern, 100000)
		if _, err := whole.scan("f", bytes.TrimPrefix(data, []byte(utf8BOM)), 0); err != nil {
			t.Fatal(err)
		}
		streamed := newTestWalk(pattern, 100000)
		if err := streamed.stream("f", bytes.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(whole.c.matches, streamed.c.matches) || len(whole.c.matches) < 100 {
			t.Errorf("%s: stream found %d matches, scan %d", pattern, len(streamed.c.matches), len(whole.c.matches))
		}
	}

	// A NUL in the first 64 KiB: binary, nothing found.
	w := newTestWalk("needle", 100)
	if err := w.stream("f", bytes.NewReader(append([]byte("needle\n\x00"), data...))); err != nil || len(w.c.matches) != 0 {
		t.Errorf("early NUL: %v, %d matches", err, len(w.c.matches))
	}
	// A NUL later: the lines before it count, the rest not.
	late := append(append([]byte(nil), data[:len(data)*3/4]...), "\x00needle\n"...)
	w = newTestWalk("needle", 100000)
	if err := w.stream("f", bytes.NewReader(late)); err != nil {
		t.Fatal(err)
	}
	last := w.c.matches[len(w.c.matches)-1]
	if len(w.c.matches) < 10 || last.LineText == "needle" {
		t.Errorf("late NUL: %d matches, last %+v", len(w.c.matches), last)
	}

	// The collector's limit stops the stream.
	w = newTestWalk("needle", 3)
	if err := w.stream("f", bytes.NewReader(data)); err == nil || len(w.c.matches) != 3 || !w.c.truncated {
		t.Errorf("limit: %v, %d matches", err, len(w.c.matches))
	}
}

func TestScanLineNumbers(t *testing.T) {
	data := []byte("a\n\nneedle\nb\r\nneedle x\nneedle")
	for _, pattern := range []string{"needle", "ne+dle", "^$"} {
		w := newTestWalk(pattern, 100)
		n, err := w.scan("f", data, 10)
		if err != nil || n != 6 {
			t.Errorf("%s: %d lines, %v", pattern, n, err)
		}
		for _, m := range w.c.matches {
			if !utf8.ValidString(m.LineText) || m.LineNumber <= 10 {
				t.Errorf("%s: %+v", pattern, m)
			}
		}
	}
	w := newTestWalk("needle", 100)
	w.scan("f", data, 0)
	want := []lineMatch{{"f", 3, "needle"}, {"f", 5, "needle x"}, {"f", 6, "needle"}}
	if !reflect.DeepEqual(w.c.matches, want) {
		t.Errorf("got %+v, want %+v", w.c.matches, want)
	}
}

func TestBinaryHead(t *testing.T) {
	cases := map[string]int{
		"a\nb\x00":      1, // "a" is a whole line in the first three bytes
		"\n\nb\x00":     0, // whole lines, but not matching
		"ab\n\x00":      1,
		"a\n\x00":       0, // the NUL is among the first three bytes
		"abc\n\x00":     0,
		"\ufeffa\n\x00": 0, // rg's first three bytes were the BOM
	}
	for content, want := range cases {
		w := newTestWalk("a|b", 10)
		if err := w.binaryHead("f", []byte(content)); err != nil || len(w.c.matches) != want {
			t.Errorf("%q: %v, %d matches, want %d", content, err, len(w.c.matches), want)
		}
	}
}

func TestMatchesNewline(t *testing.T) {
	for pattern, want := range map[string]bool{`a\nb`: true, "a\nb": true, `\x0A`: true, `[^a]`: false, `\s`: false, `a`: false} {
		if got := matchesNewline(pattern); got != want {
			t.Errorf("matchesNewline(%q) = %v", pattern, got)
		}
	}
}
