package repo

import (
	"errors"
	"fmt"
	"path"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing/format/gitignore"
)

// This file is the glob half of the built-in search: the lines of
// .gitignore, .ignore and .rgignore files, and the globs of a repo.ripgrep
// call, compiled the way ripgrep's ignore crate compiles them.
//
// Element matching (wildcards, classes and escapes inside one path element)
// is go-git's gitignore.Pattern. Used on its own, go-git's matcher departs
// from git and rg in ways that change results, so it only ever sees one
// "**"-free run of elements of exactly the path's length:
//
//   - it matches a pattern against any prefix of the path (so "!*/" would
//     re-include every file below any directory), and a slash-less pattern
//     against any element of the path, not just the last;
//   - after "**" it takes the first element that fits and never
//     backtracks, so "**/a/b" misses "a/a/b";
//   - "a/**" matches "a" itself;
//   - it knows neither rg's class rules ("[!x]", "[]x]", "[x-]") nor its
//     {a,b} alternatives, and gives up on "**" inside an element, which rg
//     reads as "*".
//
// The rest (anchoring, "**", dir-only, negation, precedence) is here.

// verdict is what a rule set says about a path.
type verdict int

const (
	noMatch         verdict = iota
	matchedPositive         // a plain line or glob matched last
	matchedNegated          // a "!" line or glob matched last
)

// ruleSet is one ignore file, or the globs of one call. Later rules take
// precedence over earlier ones, as in git.
type ruleSet struct {
	rules []rule
	// positives counts the rules without "!"; for globs it decides whether
	// files that match no glob are skipped.
	positives int
}

// rule is one compiled line.
type rule struct {
	negated  bool // the line started with "!"
	dirOnly  bool // the line ended with "/"
	basename bool // the line had no "/": it matches the last path element, at any depth
	alts     []elemGlob
}

// elemGlob is one brace alternative of a rule, split at its "**"
// elements: runs[i] must match a run of path elements exactly, and any
// number of elements may lie between consecutive runs.
type elemGlob struct {
	runs []elemRun
}

// elemRun is a "**"-free run of glob elements.
type elemRun struct {
	n   int               // how many path elements it matches
	pat gitignore.Pattern // nil when n == 0
}

// maxAlternatives bounds brace expansion, which multiplies per group.
const maxAlternatives = 1024

// errNoRule is parseRule's answer for comments and blank lines.
var errNoRule = errors.New("no rule on this line")

// parseRuleSet compiles the lines of an ignore file. Lines that do not
// compile are dropped, as rg drops them, so one bad line does not void the
// file.
func parseRuleSet(content string) *ruleSet {
	rs := &ruleSet{}
	content = strings.TrimPrefix(content, "\uFEFF")
	for line := range strings.Lines(content) {
		r, err := parseRule(strings.TrimSuffix(line, "\n"))
		if err != nil {
			continue
		}
		rs.add(r)
	}
	if len(rs.rules) == 0 {
		return nil
	}
	return rs
}

// parseGlobs compiles a call's globs; unlike ignore files, a glob that
// does not compile is the caller's mistake and is reported.
func parseGlobs(globs []string) (*ruleSet, error) {
	rs := &ruleSet{}
	for _, g := range globs {
		r, err := parseRule(g)
		if errors.Is(err, errNoRule) {
			continue // rg, too, reads "#x" and blank globs as nothing
		}
		if err != nil {
			return nil, fmt.Errorf("glob %q: %w", g, err)
		}
		rs.add(r)
	}
	if len(rs.rules) == 0 {
		return nil, nil
	}
	return rs, nil
}

func (rs *ruleSet) add(r rule) {
	rs.rules = append(rs.rules, r)
	if !r.negated {
		rs.positives++
	}
}

// parseRule compiles one line with the rules of rg's GitignoreBuilder.
func parseRule(line string) (rule, error) {
	var r rule
	if strings.HasPrefix(line, "#") {
		return r, errNoRule
	}
	if !strings.HasSuffix(line, `\ `) {
		line = strings.TrimRightFunc(line, unicode.IsSpace)
	}
	if line == "" {
		return r, errNoRule
	}
	anchored := false
	if strings.HasPrefix(line, `\!`) || strings.HasPrefix(line, `\#`) {
		line = line[1:]
	} else {
		if rest, ok := strings.CutPrefix(line, "!"); ok {
			r.negated = true
			line = rest
		}
		if rest, ok := strings.CutPrefix(line, "/"); ok {
			anchored = true
			line = rest
		}
	}
	if rest, ok := strings.CutSuffix(line, "/"); ok {
		r.dirOnly = true
		line = rest
	}
	if line == "" {
		// What is left of "!", "/" or "!/". rg still makes a glob of it:
		// "**/" when unanchored, which matches everything, and "" when
		// anchored, which matches nothing.
		if anchored {
			return r, nil
		}
		line = "**"
	}
	// A slash anywhere anchors the pattern to the ignore file's directory;
	// without one it matches a name at any depth, like "**/name".
	r.basename = !anchored && !strings.Contains(line, "/")
	if strings.HasSuffix(line, "/**") {
		// Everything inside, but not the directory itself.
		line += "/*"
	}
	alts, err := expandBraces(line)
	if err != nil {
		return r, err
	}
	for _, a := range alts {
		g, err := compileElemGlob(a)
		if err != nil {
			return r, err
		}
		r.alts = append(r.alts, g)
	}
	return r, nil
}

// compileElemGlob splits a brace-free glob into runs between "**"
// elements and hands each run to go-git.
func compileElemGlob(glob string) (elemGlob, error) {
	var g elemGlob
	var run []string
	flush := func() {
		er := elemRun{n: len(run)}
		if len(run) > 0 {
			// The leading "/" makes go-git match element by element
			// from the first; the run's length is checked by the caller.
			er.pat = gitignore.ParsePattern("/"+strings.Join(run, "/"), nil)
		}
		g.runs = append(g.runs, er)
		run = nil
	}
	for i, e := range strings.Split(bytewise(glob), "/") {
		if e == "**" {
			if i == 0 || len(run) > 0 {
				flush()
			}
			continue // consecutive "**" are one
		}
		if e == "" {
			// "a//b": no path has an empty element. rg's glob would need
			// a literal "//", so the rule never matches.
			return elemGlob{runs: []elemRun{{n: -1}}}, nil
		}
		e, err := fixElem(e)
		if err != nil {
			return g, err
		}
		if _, err := path.Match(e, ""); err != nil {
			return g, errors.New("malformed pattern")
		}
		run = append(run, e)
	}
	flush()
	return g, nil
}

// fixElem rewrites one element from globset's syntax into Go's: classes
// are re-spelled (see goClass), and "**" inside an element is "*".
func fixElem(e string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(e); i++ {
		switch c := e[i]; {
		case c == '\\' && i+1 < len(e):
			b.WriteString(e[i : i+2])
			i++
		case c == '[':
			end, class, err := goClass(e, i)
			if err != nil {
				return "", err
			}
			b.WriteString(class)
			i = end - 1
		case c == '*' && i+1 < len(e) && e[i+1] == '*':
			// The run's last star is written.
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// goClass reads the class that starts at s[i] == '[' with globset's rules
// ("!" or "^" negates; a "]" first and a "-" first or last are literal;
// a backslash is literal) and spells it for Go's path.Match, which has
// none of those rules, with every character escaped. end is the index
// after the closing "]".
func goClass(s string, i int) (end int, class string, err error) {
	var b strings.Builder
	b.WriteByte('[')
	i++
	if i < len(s) && (s[i] == '!' || s[i] == '^') {
		b.WriteByte('^')
		i++
	}
	type span struct{ lo, hi rune }
	var spans []span
	inRange := false
	for first := true; ; first = false {
		if i >= len(s) {
			return 0, "", errors.New("unclosed character class; missing ']'")
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		i += size
		switch {
		case c == ']' && !first:
			if inRange {
				spans = append(spans, span{'-', '-'})
			}
			for _, sp := range spans {
				b.WriteString("\\" + string(sp.lo))
				if sp.hi != sp.lo {
					b.WriteString("-\\" + string(sp.hi))
				}
			}
			b.WriteByte(']')
			return i, b.String(), nil
		case c == '-' && !first && !inRange:
			inRange = true
		case inRange:
			last := &spans[len(spans)-1]
			if c < last.lo {
				return 0, "", fmt.Errorf("invalid range; '%c' > '%c'", last.lo, c)
			}
			last.hi = c
			inRange = false
		default:
			spans = append(spans, span{c, c})
		}
	}
}

// classEnd is the index after the class that starts at s[i] == '[', or -1
// if it is not closed.
func classEnd(s string, i int) int {
	end, _, err := goClass(s, i)
	if err != nil {
		return -1
	}
	return end
}

// expandBraces turns "a{b,c}d" into "abd" and "acd", as globset does.
// Braces may not nest, and a "}" with no "{" is dropped (rg 13's globset
// does both). Inside a class, braces and commas are plain characters.
func expandBraces(s string) ([]string, error) {
	open := -1
	for i := 0; i < len(s) && open < 0; i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			if end := classEnd(s, i); end > 0 {
				i = end - 1
			}
		case '{':
			open = i
		case '}':
			return expandBraces(s[:i] + s[i+1:])
		}
	}
	if open < 0 {
		return []string{s}, nil
	}
	var alts []string
	start := open + 1
	for i := start; i < len(s); i++ {
		switch s[i] {
		case '\\':
			i++
		case '[':
			if end := classEnd(s, i); end > 0 {
				i = end - 1
			}
		case '{':
			return nil, errors.New("nested alternate groups are not allowed")
		case ',':
			alts = append(alts, s[start:i])
			start = i + 1
		case '}':
			alts = append(alts, s[start:i])
			rest, err := expandBraces(s[i+1:])
			if err != nil {
				return nil, err
			}
			if len(alts)*len(rest) > maxAlternatives {
				return nil, errors.New("too many {a,b} alternatives")
			}
			out := make([]string, 0, len(alts)*len(rest))
			for _, a := range alts {
				for _, r := range rest {
					out = append(out, s[:open]+a+r)
				}
			}
			return out, nil
		}
	}
	return nil, errors.New("unclosed alternate group; missing '}'")
}

// bytewise spells each byte of s as the rune of the same number (Latin-1).
// rg's globs match bytes, not characters: "?" is one byte, so it does not
// match "é" and "??" does; a class is a set of bytes. Go's path.Match works
// on runes, so patterns and paths are both passed through bytewise.
func bytewise(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			r := make([]rune, len(s))
			for j := 0; j < len(s); j++ {
				r[j] = rune(s[j])
			}
			return string(r)
		}
	}
	return s
}

// match reports which rule, if any, decides rel (slash-separated and
// relative to the rule set's directory). The last matching rule wins;
// dir-only rules are passed over for files, as rg does.
func (rs *ruleSet) match(rel string, isDir bool) verdict {
	if rs == nil {
		return noMatch
	}
	elems := strings.Split(bytewise(rel), "/")
	for i := len(rs.rules) - 1; i >= 0; i-- {
		r := &rs.rules[i]
		if r.dirOnly && !isDir {
			continue
		}
		if r.matches(elems) {
			if r.negated {
				return matchedNegated
			}
			return matchedPositive
		}
	}
	return noMatch
}

func (r *rule) matches(elems []string) bool {
	if r.basename {
		elems = elems[len(elems)-1:]
	}
	for _, g := range r.alts {
		if g.match(elems) {
			return true
		}
	}
	return false
}

// match reports whether the whole of elems fits the glob. failed memoizes
// (run, offset) pairs known not to fit, which keeps globs with many "**"
// linear in the path's depth.
func (g elemGlob) match(elems []string) bool {
	var failed map[[2]int]bool // only globs with three runs or more can backtrack
	if len(g.runs) > 2 {
		failed = make(map[[2]int]bool)
	}
	var fit func(run, at int) bool
	fit = func(run, at int) bool {
		if failed[[2]int{run, at}] {
			return false
		}
		ok := false
		r := g.runs[run]
		if r.n >= 0 && at+r.n <= len(elems) &&
			(r.pat == nil || r.pat.Match(elems[at:at+r.n], false) == gitignore.Exclude) {
			next := at + r.n
			if run == len(g.runs)-1 {
				ok = next == len(elems)
			} else {
				for k := next; k <= len(elems) && !ok; k++ {
					ok = fit(run+1, k)
				}
			}
		}
		if !ok && failed != nil {
			failed[[2]int{run, at}] = true
		}
		return ok
	}
	return fit(0, 0)
}
