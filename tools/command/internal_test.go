package command

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"unicode/utf8"
)

// The capture keeps exactly the head and the tail of what was written,
// however the writes are chunked.
func TestCaptureKeepsHeadAndTail(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, max := range []int{1, 2, 7, 64} {
		for _, size := range []int{0, 1, max / 2, max - 1, max, max + 1, 3 * max, 10*max + 3} {
			for trial := range 5 {
				data := make([]byte, size)
				for i := range data {
					data[i] = byte('a' + rng.IntN(26))
				}
				c := newCapture(max)
				for rest := data; len(rest) > 0; {
					n := 1 + rng.IntN(min(len(rest), 2*max+1))
					c.Write(rest[:n])
					rest = rest[n:]
				}
				name := fmt.Sprintf("max %d size %d trial %d", max, size, trial)
				if c.total != int64(size) || c.truncated() != (size > max) {
					t.Fatalf("%s: total %d truncated %v", name, c.total, c.truncated())
				}
				headLen := min(size, max/2)
				tailLen := min(size-headLen, max-max/2)
				if !bytes.Equal(c.head, data[:headLen]) || !bytes.Equal(c.tail(), data[size-tailLen:]) {
					t.Fatalf("%s: head %q tail %q of %q", name, c.head, c.tail(), data)
				}
				if size <= max && c.text() != string(data) {
					t.Fatalf("%s: text %q of %q", name, c.text(), data)
				}
			}
		}
	}
}

// Cutting never leaves half a UTF-8 sequence at either seam.
func TestCaptureCutsOnRuneBoundaries(t *testing.T) {
	data := strings.Repeat("é", 100) // two bytes each
	c := newCapture(33)              // head 16 bytes, tail 17:
	c.Write([]byte("x" + data))      // both seams split an "é"
	text := c.text()
	if !utf8.ValidString(text) || strings.ContainsRune(text, utf8.RuneError) {
		t.Fatalf("text %q", text)
	}
	if !strings.HasPrefix(text, "xééééééé\n[... ") || !strings.HasSuffix(text, " bytes of output omitted ...]\néééééééé") {
		t.Fatalf("text %q", text)
	}
	if last := c.last(5); last != "...éé" {
		t.Fatalf("last %q", last)
	}
	small := newCapture(64)
	small.Write([]byte("abc"))
	if small.last(5) != "abc" || small.last(2) != "...bc" {
		t.Fatalf("last %q %q", small.last(5), small.last(2))
	}
}

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
	s := &streamer{}
	for _, chunk := range []string{"one\r\ntw", "o\n", strings.Repeat("x", maxStreamLine+10), "yz\nlast"} {
		s.write(stdoutStream, []byte(chunk))
	}
	s.closeStream(stdoutStream)
	got := s.streams[stdoutStream].lines
	want := []string{"one", "two", strings.Repeat("x", maxStreamLine) + " [line cut]", "last"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("lines %q", got)
	}
}

func TestSecretNames(t *testing.T) {
	for _, k := range []string{"GITHUB_TOKEN", "api_key", "DB_PASSWORD", "AWS_SECRET_ACCESS_KEY", "SSH_KEY", "x_credentials"} {
		if !isSecretName(k) {
			t.Errorf("%s is not taken for a secret", k)
		}
	}
	for _, k := range []string{"PATH", "HOME", "KEYBOARD", "MONKEY"} {
		if isSecretName(k) {
			t.Errorf("%s is taken for a secret", k)
		}
	}
	r := redactor(map[string]string{"A_TOKEN": "abcdef", "B_TOKEN": "abcdefgh", "C_TOKEN": "abcdefgh", "SHORT_TOKEN": "abc"})
	if got := r.Replace("abcdefgh abcdef abc"); got != "[redacted] [redacted] abc" {
		t.Fatalf("redacted %q", got)
	}
}
