package docs

import (
	"strings"
	"testing"
)

func TestHTMLText(t *testing.T) {
	cases := []struct{ name, html, want string }{
		{"empty", "", ""},
		{"fragment without body", "hello <b>world</b>", "hello world"},
		{"whitespace collapses", "<p>  a \n\t b   c  </p>", "a b c"},
		{"inline elements keep spaces", "<p><b>bold</b> <i>it</i>al<code>x</code></p>", "bold italx"},
		{"links keep their text", `<p>see <a href="https://go.dev">the Go site</a>.</p>`, "see the Go site."},
		{"entities", "<p>&lt;&gt;&amp;&quot;&#39;&eacute;&#x263A;&nbsp;x</p>", "<>&\"'é☺ x"},
		{"headings and paragraphs", "<h1>T</h1><p>a</p><p>b</p><h2>S</h2>text", "T\n\na\n\nb\n\nS\n\ntext"},
		{"divs are lines", "<div>a</div><div>b</div><div><div>c</div></div>", "a\nb\nc"},
		{"empty blocks leave no lines", "<p>a</p><div></div><p> </p><div><span></span></div><p>b</p>", "a\n\nb"},
		{"br", "a<br>b<br><br>c<br><br><br>d", "a\nb\n\nc\n\nd"},
		{"lists", "<ul><li>a<li>b<ul><li>c</ul></ul><ol><li>x<li>y</ol>", "- a\n- b\n  - c\n\n1. x\n2. y"},
		{"empty list item", "<ul><li></li><li>b</li></ul>", "-\n- b"},
		{"pre keeps layout", "<p>code:</p><pre>  a\n\tb  \n</pre><p>after</p>", "code:\n\n  a\n\tb  \n\nafter"},
		{"pre with markup", "<pre><code><span>if</span> x {\n  y()\n}</code></pre>", "if x {\n  y()\n}"},
		{"table", "<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td></td><td>3</td></tr></table>", "a | b\n1 | | 3"},
		{"dropped elements", "<head><title>t</title><style>s</style></head><script>x</script><noscript>n</noscript>" +
			"<template>tp</template><svg><title>st</title><text>sv</text></svg><iframe>if</iframe>" +
			"<button>b</button><select><option>o</option></select><p>kept</p>", "kept"},
		{"hidden", `<p hidden>h</p><span aria-hidden="true">icon</span><span aria-hidden="false">shown</span>`, "shown"},
		{"img alt", `<p>a <img src="x.png" alt="diagram"> b <img src="y.png"></p>`, "a diagram b"},
		{"comments", "a<!-- comment -->b", "ab"},
		{"unclosed (truncated) document", "<p>a</p><ul><li>b<li>c<p>d e", "a\n\n- b\n- c\n\nd e"},
		{"math text is kept", "<p>x <math><mi>y</mi></math></p>", "x y"},
		{"dl", "<dl><dt>term</dt><dd>def</dd></dl>", "term\ndef"},
	}
	for _, c := range cases {
		if got := htmlText(c.html); got != c.want {
			t.Errorf("%s:\n got %q\nwant %q", c.name, got, c.want)
		}
	}
}

// TestHTMLTextLarge checks that a big document is reduced in linear time:
// a table of many empty cells once made every line rewrite the buffer.
func TestHTMLTextLarge(t *testing.T) {
	var b strings.Builder
	b.WriteString("<table>")
	for range 20000 {
		b.WriteString("<tr><td>x</td><td></td></tr>")
	}
	b.WriteString("</table>")
	got := htmlText(b.String())
	if n := strings.Count(got, "\n"); n != 19999 {
		t.Errorf("%d lines", n+1)
	}
}

func TestValidUTF8Prefix(t *testing.T) {
	for s, want := range map[string]bool{
		"": true, "abc": true, "caf\xc3\xa9": true, "caf\xc3": true, "a\xe2\x82": true,
		"caf\xe9!": false, "caf\xe9": true, // a Latin-1 é at the very end looks like a cut sequence "\xff": false, "a\xe2\x82b": false, "€\xf0\x9f\x98": true,
	} {
		if got := validUTF8Prefix([]byte(s)); got != want {
			t.Errorf("%q: %v", s, got)
		}
	}
}
