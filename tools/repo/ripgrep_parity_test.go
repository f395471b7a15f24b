package repo_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"troupe/tools/repo"
	"troupe/workspace"
)

// parityTree exercises everything in which rg and the built-in search
// could part ways: ignore files at several depths and of all three kinds,
// negation, anchoring, dir-only patterns, "**", a nested repository,
// hidden entries, symlinks, binary files, CRLF, long and invalid lines.
func parityTree() fixture {
	long := strings.Repeat("x", 1998) + "é needle " + strings.Repeat("y", 3000)
	return fixture{
		".gitignore": "# a comment\n" +
			"*.log\n" +
			"!keep.log\n" +
			"build/\n" +
			"/anchored.txt\n" +
			"**/gen/*.go\n" +
			"docs/**/*.tmp\n" +
			"\\#hash.txt\n" +
			"*.{bak,orig}\n" +
			"out/**\n" +
			"!out/keep/\n" +
			"deep/**/x/y.txt\n" +
			"trailing-space.txt   \n" +
			"onlydir/\n" +
			"[!a]bc.txt\n",
		".ignore":                   "ignored-by-ignore.txt\n!sub/beats-gitignore.md\n",
		"a.txt":                     "needle one\nno\nneedle two\n",
		"b.go":                      "package b // needle\n",
		"keep.log":                  "needle kept log\n",
		"drop.log":                  "needle dropped log\n",
		"anchored.txt":              "needle anchored at root\n",
		"sub/anchored.txt":          "needle anchored only at root, so this one stays\n",
		"build/x.txt":               "needle in build\n",
		"sub/build":                 "needle: build is a file here, and build/ is dir-only\n",
		"gen/z.go":                  "needle generated\n",
		"sub/gen/z.go":              "needle generated deeper\n",
		"gen/z.txt":                 "needle not go\n",
		"docs/a/b/c.tmp":            "needle tmp\n",
		"docs/c.tmp":                "needle tmp shallow\n",
		"#hash.txt":                 "needle hash\n",
		"x.bak":                     "needle bak\n",
		"x.orig":                    "needle orig\n",
		"out/a.txt":                 "needle out\n",
		"out/keep/b.txt":            "needle out keep\n",
		"deep/x/y.txt":              "needle deep 1\n",
		"deep/x/x/y.txt":            "needle deep 2\n",
		"deep/q/x/y.txt":            "needle deep 3\n",
		"deep/x/z.txt":              "needle deep 4\n",
		"trailing-space.txt":        "needle trailing\n",
		"onlydir":                   "needle onlydir is a file\n",
		"sub/onlydir/f.txt":         "needle inside onlydir\n",
		"abc.txt":                   "needle abc\n",
		"xbc.txt":                   "needle xbc\n",
		"ignored-by-ignore.txt":     "needle ignore file\n",
		"sub/.gitignore":            "!*.log\nlocal-only\n*.md\n!README.md\n",
		"sub/again.log":             "needle re-included log\n",
		"sub/local-only":            "needle local\n",
		"sub/notes.md":              "needle md\n",
		"sub/README.md":             "needle readme\n",
		"sub/beats-gitignore.md":    "needle .ignore beats .gitignore\n",
		"sub/.rgignore":             "rg-ignored.txt\n",
		"sub/rg-ignored.txt":        "needle rgignore\n",
		"sub/deeper/more.txt":       "needle deeper\n",
		"sub/deeper/rg-ignored.txt": "needle rgignore deeper\n",
		"wl/.gitignore":             "*\n!*/\n!*.go\n",
		"wl/a.go":                   "needle wl go\n",
		"wl/b.txt":                  "needle wl txt\n",
		"wl/sub/c.go":               "needle wl sub go\n",
		"wl/sub/d.txt":              "needle wl sub txt\n",
		"nested/.git/HEAD":          "needle git internals\n",
		"nested/x.log":              "needle log in nested repo\n",
		"nested/.gitignore":         "*.txt\n",
		"nested/y.txt":              "needle nested txt\n",
		".hidden.txt":               "needle hidden\n",
		".hdir/f.txt":               "needle in hidden dir\n",
		"link.txt":                  "->a.txt",
		"linkdir":                   "->sub",
		"etc":                       "->/etc",
		"escape":                    "->../../../..",
		"dangling":                  "->nowhere",
		"bin.dat":                   "needle\x00binary\n",
		"late-nul.txt":              "needle before\n" + strings.Repeat("z", 5000) + "\x00\n",
		"crlf.txt":                  "needle crlf\r\nplain\r\nneedle again\r\n",
		"long.txt":                  long + "\n",
		"invalid.txt":               "needle \xff\xfe bad\n",
		"bom.txt":                   "\xEF\xBB\xBFneedle bom\n",
		"noeol.txt":                 "first\nneedle last",
		"empty.txt":                 "",
		"unicode.txt":               "naïve needle café\n",
		"a/b.txt":                   "needle sorting 1\n",
		"a.b/c.txt":                 "needle sorting 2\n",
		"a-b.txt":                   "needle sorting 3\n",
		"B.txt":                     "needle sorting 4\n",
		"sp ace.txt":                "needle space\n",
		"emptydir/":                 "",
	}
}

// addSpecials adds what a fixture cannot express: a FIFO (which must not
// hang either search) and a file name that is not valid UTF-8.
func addSpecials(t *testing.T, dir string) {
	t.Helper()
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo.txt"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "bad\xffname.txt"), []byte("needle bad name\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

type parityCase struct {
	name       string
	query      string
	globs      []string
	maxMatches int
}

var parityCases = []parityCase{
	{name: "all", query: "needle", maxMatches: 10000},
	{name: "default limit", query: "needle"},
	{name: "truncated", query: "needle", maxMatches: 3},
	{name: "anchors", query: "^needle [a-z]+$", maxMatches: 10000},
	{name: "cr is part of the line", query: "crlf\\r$", maxMatches: 10000},
	{name: "ignore case", query: "(?i)NEEDLE (ONE|TWO)", maxMatches: 10000},
	{name: "non-ascii", query: "café|é needle", maxMatches: 10000},
	{name: "no prefix", query: "[n]eedle (on|tw)e", maxMatches: 10000},
	{name: "no match", query: "does-not-occur-anywhere", maxMatches: 10000},
	{name: "positive glob", query: "needle", globs: []string{"*.txt"}, maxMatches: 10000},
	{name: "negative glob", query: "needle", globs: []string{"!*.txt"}, maxMatches: 10000},
	{name: "both globs", query: "needle", globs: []string{"*.txt", "!sub/**"}, maxMatches: 10000},
	{name: "last glob wins", query: "needle", globs: []string{"!a.txt", "*.txt"}, maxMatches: 10000},
	{name: "last glob wins reversed", query: "needle", globs: []string{"*.txt", "!a.txt"}, maxMatches: 10000},
	{name: "dir glob", query: "needle", globs: []string{"sub/**"}, maxMatches: 10000},
	{name: "dir-only negative glob", query: "needle", globs: []string{"!sub/"}, maxMatches: 10000},
	{name: "alternatives", query: "needle", globs: []string{"*.{go,md}"}, maxMatches: 10000},
	{name: "glob overrides gitignore", query: "needle", globs: []string{"*.log"}, maxMatches: 10000},
	{name: "glob overrides hidden", query: "needle", globs: []string{".hidden.txt", "*.go"}, maxMatches: 10000},
	{name: "star glob", query: "needle", globs: []string{"*"}, maxMatches: 10000},
	{name: "anchored glob", query: "needle", globs: []string{"/a.txt", "sub/*.md"}, maxMatches: 10000},
	{name: "class glob", query: "needle", globs: []string{"[!a]*.txt"}, maxMatches: 10000},
	{name: "double star inside name", query: "needle", globs: []string{"a**"}, maxMatches: 10000},
}

// TestRipgrepParity runs every case with rg and with the built-in search
// on the same tree and wants identical results.
func TestRipgrepParity(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		t.Skip("rg is not installed, so there is nothing to compare the built-in search with (apt-get install ripgrep)")
	}
	ws, dir := parityTree().build(t)
	addSpecials(t, dir)
	withRg := newToolSet(t, ws, repo.Options{})
	builtin := newToolSet(t, ws, repo.Options{DisableRipgrep: true})
	for _, tc := range parityCases {
		t.Run(tc.name, func(t *testing.T) {
			args := map[string]any{"query": tc.query}
			if tc.globs != nil {
				args["globs"] = tc.globs
			}
			if tc.maxMatches != 0 {
				args["maxMatches"] = tc.maxMatches
			}
			var got, want grepResult
			ctx := testCtx(t, 20*time.Second)
			if err := withRg.call(ctx, repo.NameRipgrep, args, &want); err != nil {
				t.Fatalf("rg: %v", err)
			}
			if err := builtin.call(ctx, repo.NameRipgrep, args, &got); err != nil {
				t.Fatalf("built-in: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("built-in search and rg differ\n%s", diffMatches(got, want))
			}
		})
	}
}

// diffMatches renders two results side by side, marking differing rows.
func diffMatches(got, want grepResult) string {
	row := func(ms []grepMatch, i int) string {
		if i >= len(ms) {
			return ""
		}
		text := ms[i].LineText
		if len(text) > 60 {
			text = text[:60] + "..."
		}
		return fmt.Sprintf("%s:%d:%q", ms[i].FilePath, ms[i].LineNumber, text)
	}
	var b strings.Builder
	b.WriteString("    built-in | rg\n")
	for i := range max(len(got.Matches), len(want.Matches)) {
		g, w := row(got.Matches, i), row(want.Matches, i)
		mark := "   "
		if g != w {
			mark = "!! "
		}
		fmt.Fprintf(&b, "%s%s | %s\n", mark, g, w)
	}
	if got.Truncated != want.Truncated {
		fmt.Fprintf(&b, "!! truncated: built-in %v, rg %v\n", got.Truncated, want.Truncated)
	}
	return b.String()
}

// Vocabularies for the random parity tests: names and patterns chosen to
// hit every corner of ignore and glob syntax the built-in search handles.
var (
	randomNames = []string{
		"a", "b", "x", "a.txt", "b.go", "c.md", "d.txt", "x.log", "ab", "ba", "a b", "a ", "é",
		".h", ".git", "#c", "!b", "[x]", "]", "a-", `\`, "x}b", "a,b", "{",
	}
	randomPatterns = []string{
		"a", "a ", `a\ `, "*", "?", "??", "**", "**/", "*.txt", "*.t?t", "x.*", "*b", "a**", "**a", "*/",
		"!a.txt", "!*/", "!*.go", "!**/*.go", "!.h", "!", "/", "/a", "/b/", "/.h/", "/*.log", "!/b",
		"a/", "!a/", "b/a/", "!b/a", "a/b/", "*/a", "a/b.txt", "a//b", "b/*.go", "a/*/b",
		"**/b", "**/a/b", "**/a/**", "a/**", "!a/**", "a/**/b", "a/**/*", "a/**b", "b/**/", "!**/a",
		"[ab]*", "[!a]*", "[^a-c]*", "[a-c]", "[]]*", `[\]*`, "[a-]", "[--a]*", "[!]]*", "[{]*",
		"*.{go,md}", "{a,b}/x.log", "!{a,b}", "{,a}", "{a,b}}", "a}", "x}b", "*,*",
		`\!x`, `\#c`, `\a`, "#c",
	}
	randomPieces = []string{
		"a", "b", "ab", "aaaa", " ", "\t", "é", "\n", "\r\n", "\r", "\x00", "\xEF\xBB\xBF",
		strings.Repeat("a", 1500), strings.Repeat("é", 700),
	}
	// randomQueries leave out what the two regex engines treat differently
	// on purpose (Unicode classes, bytes that are not UTF-8).
	randomQueries = []string{
		"a", "^a", "a$", "^$", "^", `\r`, `b\r$`, "é", "(?i)É", "ab|ba", "a+b", `\S`, "[^a]", "a.b",
		`a\s*$`, `^\s*$`, "aaaa", "\t",
	}
)

// TestRipgrepParityRandomTrees compares the two searches on random trees
// of random ignore files and random globs. The seed is fixed so a failure
// can be replayed; set REPO_PARITY_SEED to explore others.
func TestRipgrepParityRandomTrees(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		t.Skip("rg is not installed, so there is nothing to compare the built-in search with (apt-get install ripgrep)")
	}
	r := rand.New(rand.NewPCG(paritySeed(t), 1))
	iterations := 150
	if testing.Short() {
		iterations = 20
	}
	ignoreFiles := []string{".gitignore", ".ignore", ".rgignore"}
	for iter := range iterations {
		fx := fixture{}
		var grow func(dir string, depth int)
		grow = func(dir string, depth int) {
			for range 1 + r.IntN(4) {
				p := dir + randomNames[r.IntN(len(randomNames))]
				if depth < 3 && r.IntN(3) == 0 {
					grow(p+"/", depth+1)
					continue
				}
				fx[p] = "needle " + p + "\n"
			}
			if r.IntN(2) == 0 {
				var lines []string
				for range 1 + r.IntN(4) {
					lines = append(lines, randomPatterns[r.IntN(len(randomPatterns))])
				}
				fx[dir+ignoreFiles[r.IntN(len(ignoreFiles))]] = strings.Join(lines, "\n") + "\n"
			}
		}
		grow("", 0)
		for p := range fx { // a name used for both a file and a directory
			for q := range fx {
				if strings.HasPrefix(q, p+"/") {
					delete(fx, p)
				}
			}
		}
		args := map[string]any{"query": "needle", "maxMatches": 10000}
		if r.IntN(2) == 0 {
			var globs []string
			for range 1 + r.IntN(3) {
				globs = append(globs, randomPatterns[r.IntN(len(randomPatterns))])
			}
			args["globs"] = globs
		}
		ws, _ := fx.build(t)
		if msg := compareEngines(t, ws, args); msg != "" {
			var ignores []string
			for p, c := range fx {
				if slices.Contains(ignoreFiles, path.Base(p)) {
					ignores = append(ignores, fmt.Sprintf("%s=%q", p, c))
				}
			}
			slices.Sort(ignores)
			t.Fatalf("iteration %d, globs %q, ignore files %s\n%s", iter, args["globs"], strings.Join(ignores, " "), msg)
		}
	}
}

// TestRipgrepParityRandomContent compares the two searches on files of
// random lines: CR, CRLF, NUL bytes, byte order marks, long lines.
func TestRipgrepParityRandomContent(t *testing.T) {
	if _, err := exec.LookPath("rg"); err != nil {
		t.Skip("rg is not installed, so there is nothing to compare the built-in search with (apt-get install ripgrep)")
	}
	r := rand.New(rand.NewPCG(paritySeed(t), 2))
	iterations := 8
	if testing.Short() {
		iterations = 3
	}
	for iter := range iterations {
		fx := fixture{}
		for f := range 5 {
			var b strings.Builder
			for range r.IntN(30) {
				p := randomPieces[r.IntN(len(randomPieces))]
				if p == "\x00" && r.IntN(3) != 0 {
					continue // keep most files text
				}
				b.WriteString(p)
			}
			fx[fmt.Sprintf("f%d.txt", f)] = b.String()
		}
		ws, _ := fx.build(t)
		for _, q := range randomQueries {
			if msg := compareEngines(t, ws, map[string]any{"query": q, "maxMatches": 10000}); msg != "" {
				var files []string
				for p, c := range fx {
					files = append(files, fmt.Sprintf("%s=%q", p, c))
				}
				slices.Sort(files)
				t.Fatalf("iteration %d, query %q\n%s\nfiles:\n%s", iter, q, msg, strings.Join(files, "\n"))
			}
		}
	}
}

func paritySeed(t *testing.T) uint64 {
	seed := uint64(20240601)
	if s := os.Getenv("REPO_PARITY_SEED"); s != "" {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("REPO_PARITY_SEED: %v", err)
		}
		seed = n
	}
	return seed
}

// compareEngines runs one search both ways and describes any difference.
func compareEngines(t *testing.T, ws *workspace.Root, args map[string]any) string {
	t.Helper()
	ctx := testCtx(t, 20*time.Second)
	var got, want grepResult
	errRg := newToolSet(t, ws, repo.Options{}).call(ctx, repo.NameRipgrep, args, &want)
	errBuiltin := newToolSet(t, ws, repo.Options{DisableRipgrep: true}).call(ctx, repo.NameRipgrep, args, &got)
	switch {
	case (errRg == nil) != (errBuiltin == nil):
		return fmt.Sprintf("rg error: %v\nbuilt-in error: %v", errRg, errBuiltin)
	case errRg != nil:
		return ""
	case !reflect.DeepEqual(got, want):
		return diffMatches(got, want)
	}
	return ""
}
