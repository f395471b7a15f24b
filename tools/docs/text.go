package docs

import (
	"bytes"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
)

// contentKind is how docs.fetch turns a body into text.
type contentKind int

const (
	unsupported  contentKind = iota // refused: images, PDFs, archives, octet streams
	htmlContent                     // reduced to readable text
	plainContent                    // returned as is
)

// classify decides by media type (lower case, no parameters).
func classify(mediaType string) contentKind {
	switch {
	case mediaType == "text/html", mediaType == "application/xhtml+xml":
		return htmlContent
	case strings.HasPrefix(mediaType, "text/"),
		strings.HasSuffix(mediaType, "+json"), strings.HasSuffix(mediaType, "+xml"):
		return plainContent
	}
	switch mediaType {
	case "application/json", "application/xml", "application/javascript", "application/ecmascript",
		"application/x-javascript", "application/yaml", "application/x-yaml", "application/toml",
		"application/x-ndjson":
		return plainContent
	}
	return unsupported
}

// textEncoding picks the encoding of a body. For HTML: a byte order mark,
// then the Content-Type charset, then a <meta> charset in the first 1024
// bytes (all through charset.DetermineEncoding); when neither header nor
// byte order mark decides, a body that is valid UTF-8 is UTF-8, and
// anything else windows-1252 (what browsers assume). For other text: the
// charset parameter if it names a known encoding, otherwise UTF-8. A nil
// result means UTF-8.
func textEncoding(kind contentKind, body []byte, contentType string, params map[string]string) encoding.Encoding {
	if kind == htmlContent {
		e, name, certain := charset.DetermineEncoding(body, contentType)
		if name == "utf-8" || !certain && validUTF8Prefix(body) {
			return nil
		}
		return e
	}
	if cs := params["charset"]; cs != "" {
		if e, name := charset.Lookup(cs); e != nil && name != "utf-8" {
			return e
		}
	}
	return nil
}

// validUTF8Prefix reports whether b is valid UTF-8, but for a sequence cut
// short at its end (the body may have been cut there).
func validUTF8Prefix(b []byte) bool {
	for i := len(b) - 1; i >= 0 && i > len(b)-utf8.UTFMax; i-- {
		if b[i] < utf8.RuneSelf {
			break
		}
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				b = b[:i]
			}
			break
		}
	}
	return utf8.Valid(b)
}

// decodeText turns body into valid UTF-8: decoded from enc (nil means
// UTF-8), a UTF-8 byte order mark dropped, and invalid bytes replaced with
// U+FFFD, so the text is always a valid JSON string.
func decodeText(body []byte, enc encoding.Encoding) string {
	if enc != nil {
		if d, err := enc.NewDecoder().Bytes(body); err == nil {
			body = d
		}
	}
	body = bytes.TrimPrefix(body, []byte("\uFEFF"))
	return strings.ToValidUTF8(string(body), "\uFFFD")
}

// skipped are the elements whose content is never text a reader sees.
var skipped = map[atom.Atom]bool{
	atom.Head: true, atom.Script: true, atom.Style: true, atom.Noscript: true,
	atom.Template: true, atom.Svg: true, atom.Iframe: true, atom.Object: true,
	atom.Canvas: true, atom.Audio: true, atom.Video: true, atom.Select: true,
	atom.Button: true,
}

// Block elements start and end lines. Paragraph-like ones are set apart
// by a blank line, the others by a line break.
var (
	paragraphs = map[atom.Atom]bool{
		atom.P: true, atom.H1: true, atom.H2: true, atom.H3: true, atom.H4: true, atom.H5: true,
		atom.H6: true, atom.Pre: true, atom.Blockquote: true, atom.Ul: true, atom.Ol: true,
		atom.Dl: true, atom.Table: true, atom.Figure: true, atom.Hr: true, atom.Address: true,
		atom.Details: true, atom.Fieldset: true, atom.Form: true,
	}
	lines = map[atom.Atom]bool{
		atom.Html: true, atom.Body: true, atom.Div: true, atom.Section: true, atom.Article: true,
		atom.Header: true, atom.Footer: true, atom.Nav: true, atom.Aside: true, atom.Main: true,
		atom.Li: true, atom.Dt: true, atom.Dd: true, atom.Tr: true, atom.Caption: true,
		atom.Figcaption: true, atom.Summary: true, atom.Legend: true, atom.Hgroup: true,
		atom.Center: true, atom.Menu: true, atom.Dialog: true, atom.Search: true,
		atom.Thead: true, atom.Tbody: true, atom.Tfoot: true, atom.Option: true,
	}
)

// htmlText reduces an HTML document to the text a reader sees: head,
// scripts, styles, templates, SVG, embedded objects and hidden elements are
// dropped; block elements become lines (paragraphs, headings, lists,
// tables and code blocks set apart by blank lines); list items start with
// "- " or their number; table cells are separated by " | "; whitespace
// collapses outside <pre>, whose content keeps its layout; links keep
// their text; entities are decoded by the parser.
func htmlText(src string) string {
	doc, err := html.Parse(strings.NewReader(src))
	if err != nil {
		return "" // only the reader can fail, and a strings.Reader does not
	}
	w := &textWriter{}
	w.walk(doc, 0)
	return strings.TrimRight(string(w.b), " \n")
}

// textWriter collects text, collapsing whitespace and owing line breaks
// until the next text arrives, so empty elements leave no empty lines.
type textWriter struct {
	b       []byte
	breaks  int  // line breaks owed before the next text: 0, 1 or 2
	space   bool // a space is owed before the next word on this line
	pre     int  // depth of <pre> elements
	written bool // some text has been written
}

// walk writes n and its subtree; lists is the depth of ul/ol around n.
func (w *textWriter) walk(n *html.Node, lists int) {
	switch n.Type {
	case html.TextNode:
		w.text(n.Data)
		return
	case html.DocumentNode:
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			w.walk(c, lists)
		}
		return
	case html.ElementNode:
	default:
		return // comments, doctypes
	}
	a := n.DataAtom
	if skipped[a] || hidden(n) {
		return
	}
	nestedList := lists > 0 && (a == atom.Ul || a == atom.Ol || a == atom.Menu)
	switch {
	case a == atom.Br:
		w.lineBreak()
		return
	case paragraphs[a] && !nestedList:
		w.brk(2)
		defer w.brk(2)
	case lines[a], nestedList:
		w.brk(1)
		defer w.brk(1)
	}
	switch a {
	case atom.Pre:
		w.pre++
		defer func() { w.pre-- }()
	case atom.Ul, atom.Ol, atom.Menu:
		lists++
	case atom.Li:
		w.literal(strings.Repeat("  ", max(lists-1, 0)) + listMarker(n))
	case atom.Td, atom.Th:
		if previousCell(n) {
			w.literal(" | ")
		} else {
			w.space = false
		}
	case atom.Img:
		// Images say nothing unless their alt text does.
		if alt := attr(n, "alt"); alt != "" {
			w.text(alt)
		}
	}
	for c := n.FirstChild; c != nil; c = c.NextSibling {
		w.walk(c, lists)
	}
	if a == atom.Td || a == atom.Th {
		w.space = false
	}
}

// text writes s: verbatim inside <pre>, otherwise with each run of
// whitespace (non-breaking spaces included) collapsed to one space and no
// space at the start of a line.
func (w *textWriter) text(s string) {
	if s == "" {
		return
	}
	if w.pre > 0 {
		w.flush()
		w.b = append(w.b, s...)
		w.written = true
		return
	}
	words := strings.Fields(s)
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) {
		w.space = true
	}
	for i, word := range words {
		if i > 0 {
			w.space = true
		}
		w.flush()
		if w.space && !w.atLineStart() {
			w.b = append(w.b, ' ')
		}
		w.space = false
		w.b = append(w.b, word...)
		w.written = true
	}
	if len(words) > 0 && unicode.IsSpace(last) {
		w.space = true
	}
}

// literal writes s as it is, after any owed line breaks and instead of
// any space before it: list markers and cell separators.
func (w *textWriter) literal(s string) {
	w.flush()
	if w.pre == 0 {
		w.b = bytes.TrimRight(w.b, " ")
	}
	w.b = append(w.b, s...)
	w.space = false
	w.written = true
}

// brk owes n line breaks (n = 2 is a blank line), unless nothing has been
// written yet.
func (w *textWriter) brk(n int) {
	if w.written {
		w.breaks = max(w.breaks, n)
	}
	w.space = false
}

// lineBreak is <br>: one more line break, so two of them make a blank line.
func (w *textWriter) lineBreak() {
	if w.written {
		w.breaks = min(w.breaks+1, 2)
	}
	w.space = false
}

// flush writes the owed line breaks.
func (w *textWriter) flush() {
	if w.breaks > 0 {
		// Spaces at the end of the line go; inside <pre> they stay.
		if w.pre == 0 {
			w.b = bytes.TrimRight(w.b, " ")
		}
		// Newlines already there (the end of a <pre>) count.
		have := len(w.b) - len(bytes.TrimRight(w.b, "\n"))
		for range w.breaks - min(have, w.breaks) {
			w.b = append(w.b, '\n')
		}
		w.breaks = 0
		w.space = false
	}
}

func (w *textWriter) atLineStart() bool {
	return len(w.b) == 0 || w.b[len(w.b)-1] == '\n'
}

// hidden reports elements marked as not shown: the hidden attribute, or
// aria-hidden="true" (icons, duplicated navigation).
func hidden(n *html.Node) bool {
	for _, a := range n.Attr {
		if a.Namespace == "" && (a.Key == "hidden" || a.Key == "aria-hidden" && strings.EqualFold(a.Val, "true")) {
			return true
		}
	}
	return false
}

func attr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Namespace == "" && a.Key == key {
			return a.Val
		}
	}
	return ""
}

// listMarker is "- " for an item of an unordered list and "N. " for one of
// an ordered list, counting from its start attribute.
func listMarker(li *html.Node) string {
	p := li.Parent
	if p == nil || p.DataAtom != atom.Ol {
		return "- "
	}
	n := 1
	if s, err := strconv.Atoi(attr(p, "start")); err == nil {
		n = s
	}
	for c := p.FirstChild; c != nil && c != li; c = c.NextSibling {
		if c.Type == html.ElementNode && c.DataAtom == atom.Li {
			n++
		}
	}
	return strconv.Itoa(n) + ". "
}

// previousCell reports whether a table cell follows another in its row.
func previousCell(cell *html.Node) bool {
	for c := cell.PrevSibling; c != nil; c = c.PrevSibling {
		if c.Type == html.ElementNode && (c.DataAtom == atom.Td || c.DataAtom == atom.Th) {
			return true
		}
	}
	return false
}
