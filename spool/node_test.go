package spool

import (
	"strings"
	"testing"
)

// A cluster node's output ids name the node, and the node is read back
// from the URI of any stream of the output, with or without a range; ids
// of one process name none.
func TestOutputIDsNameTheirNode(t *testing.T) {
	const member = "Ab3xYz9QkLmN0pQrStUvWx"
	id := NodeOutputID(member, "c-0123456789abcdef")
	if id != member+"_c-0123456789abcdef" {
		t.Fatalf("id %q", id)
	}
	if got := NodeOutputID("", "c-0123456789abcdef"); got != "c-0123456789abcdef" {
		t.Fatalf("one process: %q", got)
	}

	// The store takes the id, and its links carry it.
	s := NewStore(t.TempDir(), Limits{})
	defer s.Close()
	out, err := s.Create(id)
	if err != nil {
		t.Fatal(err)
	}
	out.Stdout.Write([]byte("hello\n"))
	out.Close()
	uri := out.Stdout.URI()
	if !strings.HasPrefix(uri, URIPrefix+member+"_") {
		t.Fatalf("link %q does not name the node", uri)
	}
	if ch, err := s.Read(uri); err != nil || string(ch.Data) != "hello\n" {
		if ch == nil {
			ch = &Chunk{}
		}
		t.Fatalf("read %q: %v %q", uri, err, ch.Data)
	}

	for _, tc := range []struct {
		uri  string
		node string
	}{
		{uri, member},
		{uri + "?offset=1&length=2", member},
		{URIPrefix + member + "_c-1/stderr", member},
		{URIPrefix + "c-0123456789abcdef/stdout", ""}, // one process
		{URIPrefix + "_c-1/stdout", ""},               // no member
		{URIPrefix + "a.b_c-1/stdout", ""},            // not a member id
		{URIPrefix + "a/b_c-1/stdout", ""},            // "_" after the id's end
		{URIPrefix + strings.Repeat("a", 65) + "_c-1/stdout", ""},
		{"file:///" + member + "_c-1/stdout", ""},
		{"", ""},
	} {
		node, ok := NodeOf(tc.uri)
		if node != tc.node || ok != (tc.node != "") {
			t.Errorf("NodeOf(%q) = %q, %v; want %q", tc.uri, node, ok, tc.node)
		}
	}
}
