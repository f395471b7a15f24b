package command

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

func TestParseArg(t *testing.T) {
	for _, c := range []struct {
		in    string
		parts []argPart
	}{
		{"plain", []argPart{{lit: "plain"}}},
		{"{a}", []argPart{{name: "a"}}},
		{"--x={a}", []argPart{{lit: "--x="}, {name: "a"}}},
		{"{a}{b.c-d_e}", []argPart{{name: "a"}, {name: "b.c-d_e"}}},
		{"{{a}}", []argPart{{lit: "{a}"}}},
		{"{{{a}}}", []argPart{{lit: "{"}, {name: "a"}, {lit: "}"}}},
		{"", nil},
	} {
		a, err := parseArg(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if fmt.Sprint(a.parts) != fmt.Sprint(c.parts) {
			t.Errorf("%q: parts %+v, want %+v", c.in, a.parts, c.parts)
		}
	}
	for _, bad := range []string{"{", "}", "{a", "a}", "{}", "{a b}", "{{a}", "{a{b}}", "{ü}"} {
		if _, err := parseArg(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// Lines are split across chunks, CRLF is trimmed, and long lines are cut
// once.
func TestLineBuffer(t *testing.T) {
	s := &streamer{room: make(chan struct{}, 1)}
	for _, chunk := range []string{"one\r\ntw", "o\n", strings.Repeat("x", maxStreamLine+10), "yz\nlast"} {
		s.write(context.Background(), stdoutStream, []byte(chunk))
	}
	s.closeStream(stdoutStream)
	got := s.streams[stdoutStream].lines
	want := []string{"one", "two", strings.Repeat("x", maxStreamLine) + " [line cut]", "last"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lines %q", got)
	}
}
