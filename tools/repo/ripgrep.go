package repo

import (
	"context"
	"encoding/json"
	"regexp"
	"regexp/syntax"
	"slices"
	"strings"
	"unicode/utf8"

	"troupe/protocol"
	"troupe/tools"
)

const (
	ripgrepDefaultMatches = 50
	ripgrepMaxMatches     = 10000
	// maxLineText caps each reported line, in bytes; minified files have
	// lines of megabytes that would drown the model's context.
	maxLineText = 2000
)

// ripgrepTool is repo.ripgrep. Which engine it uses is fixed when it is
// built.
type ripgrepTool struct {
	search searcher
}

// searcher is one way of running a search: rgSearch or builtinSearch.
type searcher interface {
	// run searches for q and feeds each matching line to c, in path
	// order, until c is full. It returns ctx.Err() once ctx is done, an
	// *tools.Error for a query the engine rejects, and a plain error for
	// anything else.
	run(ctx context.Context, req *tools.Request, q *query, c *collector) error
	// describe is a sentence for the tool description.
	describe() string
}

// query is a validated repo.ripgrep call.
type query struct {
	pattern   string
	re        *regexp.Regexp
	globs     []string
	overrides *ruleSet // globs compiled; nil when there are none
	// rgPaths are the paths rg is told to search, relative to the
	// workspace; nil means ".". Calls always search the whole workspace;
	// tests name other paths (a symlink to outside) to show that no path
	// leads the confined rg out of it.
	rgPaths []string
}

type ripgrepArgs struct {
	Query      *string  `json:"query"`
	Globs      []string `json:"globs"`
	MaxMatches *float64 `json:"maxMatches"`
}

// ripgrepResult is repo.ripgrep's structuredContent.
type ripgrepResult struct {
	Matches   []lineMatch `json:"matches"`
	Truncated bool        `json:"truncated"`
}

type lineMatch struct {
	FilePath   string `json:"filePath"`
	LineNumber int64  `json:"lineNumber"`
	LineText   string `json:"lineText"`
}

// collector gathers matches for both engines, so that line clean-up and
// the truncation rule are the same whichever engine runs.
type collector struct {
	max       int
	matches   []lineMatch
	truncated bool
}

// add records a match; it reports false once the collector is full and the
// search should stop. The match after the last one kept is what proves the
// result truncated, so a search stops after max+1 matches, not max.
func (c *collector) add(filePath string, lineNumber int64, line []byte) bool {
	if len(c.matches) == c.max {
		c.truncated = true
		return false
	}
	c.matches = append(c.matches, lineMatch{
		FilePath:   tools.ValidText([]byte(filePath)),
		LineNumber: lineNumber,
		LineText:   cleanLine(line),
	})
	return true
}

// cleanLine drops the line terminator, caps the line at maxLineText bytes
// without splitting a UTF-8 sequence and replaces invalid UTF-8.
func cleanLine(b []byte) string {
	if n := len(b); n > 0 && b[n-1] == '\n' {
		b = b[:n-1]
	}
	if n := len(b); n > 0 && b[n-1] == '\r' {
		b = b[:n-1]
	}
	if len(b) > maxLineText {
		b = b[:tools.UTF8Cut(b, maxLineText)]
	}
	return tools.ValidText(b)
}

const ripgrepInputSchema = `{
  "type": "object",
  "properties": {
    "query": {
      "type": "string",
      "minLength": 1,
      "maxLength": 10000,
      "description": "Regular expression matched against each line (RE2 syntax, case-sensitive; prefix (?i) to ignore case). Escape regex metacharacters to search for literal text."
    },
    "globs": {
      "type": "array",
      "maxItems": 100,
      "items": {"type": "string", "minLength": 1, "maxLength": 1000},
      "description": "rg --glob filters, gitignore-style, matched against workspace-relative paths: \"*.go\" selects Go files at any depth, \"src/**/*.ts\" files under src, \"*.{ts,tsx}\" either extension; a leading \"!\" excludes (\"!vendor/\"). When any glob without \"!\" is given, only files matching one are searched. The last matching glob wins."
    },
    "maxMatches": {
      "type": "integer",
      "minimum": 1,
      "maximum": 10000,
      "default": 50,
      "description": "Stop after this many matching lines."
    }
  },
  "required": ["query"],
  "additionalProperties": false
}`

const ripgrepOutputSchema = `{
  "type": "object",
  "properties": {
    "matches": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "filePath": {"type": "string", "description": "Workspace-relative, slash-separated."},
          "lineNumber": {"type": "integer", "minimum": 1},
          "lineText": {"type": "string", "description": "The line without its terminator, cut to 2000 bytes."}
        },
        "required": ["filePath", "lineNumber", "lineText"],
        "additionalProperties": false
      }
    },
    "truncated": {"type": "boolean"}
  },
  "required": ["matches", "truncated"],
  "additionalProperties": false
}`

// Spec describes repo.ripgrep.
func (t *ripgrepTool) Spec() tools.Spec {
	return tools.Spec{
		Name:  NameRipgrep,
		Title: "Search files (ripgrep)",
		Description: "Search the files of the whole workspace for a regular expression, line by line, like ripgrep (rg). " +
			"Returns matching lines in path order, each with its workspace-relative filePath, 1-based lineNumber and lineText (line terminator removed, cut to 2000 bytes). " +
			"At most maxMatches lines are returned (default 50, up to 10000); truncated tells whether more exist, so narrow the query or the globs if it is true. " +
			"Files are chosen as rg chooses them: hidden files and directories (names starting with \".\") are skipped, as are files ignored by .gitignore, .ignore or .rgignore files, binary files and symlinks; " +
			"A file matched by a glob is searched even if hidden or ignored (\".env\" finds .env), as long as its directory is searched. " +
			"The query is RE2 syntax (no lookaround or backreferences); patterns cannot span lines. " +
			t.search.describe() +
			" Use repo.readFile to see a match in context.",
		InputSchema:  json.RawMessage(ripgrepInputSchema),
		SchemasFixed: true, // constants; CheckSchemas in the tests
		OutputSchema: json.RawMessage(ripgrepOutputSchema),
		Annotations:  readOnly("Search files (ripgrep)"),
	}
}

// Call validates the query and globs with Go's parsers, whichever engine
// runs, so that a bad query is the same invalid_argument error with or
// without rg, then runs the search.
func (t *ripgrepTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	var args ripgrepArgs
	if err := tools.DecodeArgs(NameRipgrep, req.Arguments, &args); err != nil {
		return nil, err
	}
	if args.Query == nil || *args.Query == "" {
		return nil, tools.Errorf(tools.KindInvalidArgument, "query is required and must not be empty")
	}
	limit, err := tools.IntArg("maxMatches", args.MaxMatches, ripgrepDefaultMatches, 1, ripgrepMaxMatches)
	if err != nil {
		return nil, err
	}
	q, err := newQuery(*args.Query, args.Globs)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c := &collector{max: limit}
	if err := t.search.run(ctx, req, q, c); err != nil {
		return nil, err
	}
	res := ripgrepResult{Matches: c.matches, Truncated: c.truncated}
	if res.Matches == nil {
		res.Matches = []lineMatch{}
	}
	return tools.StructuredResult(res)
}

// newQuery checks the pattern and globs and compiles them.
func newQuery(pattern string, globs []string) (*query, error) {
	if strings.ContainsRune(pattern, 0) || !utf8.ValidString(pattern) {
		return nil, tools.Errorf(tools.KindInvalidArgument, "query must be valid UTF-8 without NUL characters")
	}
	re, err := regexp.Compile(pattern)
	if err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "query is not a valid regular expression: %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
	}
	if matchesNewline(pattern) {
		// rg refuses these; Go would silently find nothing, since lines are
		// searched one at a time.
		return nil, tools.Errorf(tools.KindInvalidArgument, "query is not a valid regular expression: it contains a literal newline (\\n), which can never match because lines are searched one at a time")
	}
	for _, g := range globs {
		if strings.ContainsRune(g, 0) {
			return nil, tools.Errorf(tools.KindInvalidArgument, "glob %q contains a NUL character", g)
		}
	}
	overrides, err := parseGlobs(globs)
	if err != nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "invalid glob: %v", err)
	}
	return &query{pattern: pattern, re: re, globs: slices.Clone(globs), overrides: overrides}, nil
}

// matchesNewline reports whether the pattern has a literal "\n" (written
// raw, as \n or as \x0A), which rg rejects. A "\n" inside a class or a
// negated class is fine for both: rg strips it and Go never sees one.
func matchesNewline(pattern string) bool {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return false
	}
	var walk func(*syntax.Regexp) bool
	walk = func(r *syntax.Regexp) bool {
		if r.Op == syntax.OpLiteral && slices.Contains(r.Rune, '\n') {
			return true
		}
		return slices.ContainsFunc(r.Sub, walk)
	}
	return walk(re)
}
