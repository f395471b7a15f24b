package redact

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func TestIsSecretKey(t *testing.T) {
	for _, k := range []string{
		"GITHUB_TOKEN", "gh_token", "TOKEN", "token", "API_KEY", "AWS_SECRET_ACCESS_KEY", "SSH_KEY",
		"CLIENT_SECRET", "SECRET", "DB_PASSWORD", "PGPASSWORD", "password", "MYSQL_PASSWD",
		"GPG_PASSPHRASE", "APIKEY", "OPENAI_APIKEY", "Authorization", "Proxy-Authorization", "X-Api-Key",
	} {
		if !IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = false, want true", k)
		}
	}
	for _, k := range []string{
		"", "PATH", "HOME", "KEY", "KEYBOARD", "MONKEY", "TOKENIZER", "GITHUB_TOKEN_FILE", "SECRETS_DIR", "LANG",
	} {
		if IsSecretKey(k) {
			t.Errorf("IsSecretKey(%q) = true, want false", k)
		}
	}
}

func TestEnvValues(t *testing.T) {
	got := EnvValues(map[string]string{"A_TOKEN": "tok-1", "B_TOKEN": "tok-1", "PASSWORD": "pw", "EMPTY_KEY": "", "PATH": "/bin"})
	if want := []string{"pw", "tok-1"}; !slices.Equal(got, want) {
		t.Fatalf("EnvValues = %q, want %q", got, want)
	}
	if got := EnvValues(nil); len(got) != 0 {
		t.Fatalf("EnvValues(nil) = %q", got)
	}
}

func TestNewDropsShortAndDuplicateValues(t *testing.T) {
	r := New("a", "abc", "abcd", "abcd", "", "longer-secret")
	if r.Len() != 2 {
		t.Fatalf("Len = %d, want 2 (abcd, longer-secret)", r.Len())
	}
	if got := r.Replace("a abc abcd"); got != "a abc "+Mask {
		t.Fatalf("Replace = %q", got)
	}
	var nilR *Redactor
	if nilR.Len() != 0 || nilR.Replace("abcd") != "abcd" || New().Replace("abcd") != "abcd" {
		t.Fatal("nil and empty Redactors must mask nothing")
	}
	if nilR.With("abcd").Replace("xabcdx") != "x"+Mask+"x" {
		t.Fatal("With on nil")
	}
}

func TestWithLeavesTheOriginal(t *testing.T) {
	r := New("first-secret")
	r2 := r.With("second-secret", "first-secret")
	if r.Len() != 1 || r2.Len() != 2 {
		t.Fatalf("Len %d and %d, want 1 and 2", r.Len(), r2.Len())
	}
	if got := r.Replace("second-secret"); got != "second-secret" {
		t.Fatalf("original changed: %q", got)
	}
	if got := r2.Replace("first-secret second-secret"); got != Mask+" "+Mask {
		t.Fatalf("With: %q", got)
	}
}

func TestReplace(t *testing.T) {
	r := New("abcd", "abcdefgh", "efghij", "token-123")
	for in, want := range map[string]string{
		"":                       "",
		"nothing here":           "nothing here",
		"abcd":                   Mask,
		"xabcdy":                 "x" + Mask + "y",
		"abcdefgh":               Mask, // the longest value at a position wins
		"abcdefghij":             Mask, // overlapping values mask as one run
		"abcdefghijk":            Mask + "k",
		"abcdabcd":               Mask + Mask, // adjacent occurrences are two runs
		"t=token-123&u=token-12": "t=" + Mask + "&u=token-12",
		"abc":                    "abc",
	} {
		if got := r.Replace(in); got != want {
			t.Errorf("Replace(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestReplaceDoesNotAllocateWithoutAMatch(t *testing.T) {
	r := New("token-123", "password-xyz", "another-secret")
	s := strings.Repeat("a log line without any secret in it; ", 20)
	if n := testing.AllocsPerRun(100, func() { _ = r.Replace(s) }); n != 0 {
		t.Fatalf("Replace allocated %v times without a match", n)
	}
}

// TestWriterMatchesReplace writes random texts over a small alphabet
// (so values occur, overlap and are split often) in random pieces, and
// wants exactly what Replace makes of the whole text.
func TestWriterMatchesReplace(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = "abc"[rng.IntN(3)]
		}
		return string(b)
	}
	for range 2000 {
		var values []string
		for range 1 + rng.IntN(4) {
			values = append(values, word(4+rng.IntN(5)))
		}
		r := New(values...)
		text := word(rng.IntN(80))
		var out bytes.Buffer
		w := r.Writer(&out)
		for rest := text; rest != ""; {
			n := min(len(rest), rng.IntN(7))
			if _, err := w.Write([]byte(rest[:n])); err != nil {
				t.Fatal(err)
			}
			rest = rest[n:]
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		if want := r.Replace(text); out.String() != want {
			t.Fatalf("values %q, text %q: Writer wrote %q, Replace %q", values, text, out.String(), want)
		}
	}
}

func FuzzWriter(f *testing.F) {
	f.Add("abcdefgh", "xxabcdefghyy", 3)
	f.Add("secret", "a secret, a secre", 1)
	f.Fuzz(func(t *testing.T, value, text string, step int) {
		if step <= 0 || step > 64 {
			step = 1
		}
		r := New(value, strings.ToUpper(value))
		var out bytes.Buffer
		w := r.Writer(&out)
		for i := 0; i < len(text); i += step {
			w.Write([]byte(text[i:min(i+step, len(text))]))
		}
		w.Close()
		if want := r.Replace(text); out.String() != want {
			t.Fatalf("Writer %q, Replace %q", out.String(), want)
		}
	})
}

func TestWriterHoldsBackOnlyAPossibleStart(t *testing.T) {
	r := New("secret-value")
	var out bytes.Buffer
	w := r.Writer(&out)
	w.Write([]byte("line one\n"))
	if out.String() != "line one\n" {
		t.Fatalf("a line that cannot begin a secret must pass at once, got %q", out.String())
	}
	w.Write([]byte("key=secret-"))
	if out.String() != "line one\nkey=" {
		t.Fatalf("got %q, want the possible start held back", out.String())
	}
	w.Write([]byte("valu"))
	w.Write([]byte("e!\nsecret-"))
	if want := "line one\nkey=" + Mask + "!\n"; out.String() != want {
		t.Fatalf("got %q, want %q", out.String(), want)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if want := "line one\nkey=" + Mask + "!\nsecret-"; out.String() != want {
		t.Fatalf("after Close %q, want %q", out.String(), want)
	}
	if _, err := w.Write([]byte("x")); err == nil {
		t.Fatal("Write after Close must fail")
	}
	if err := w.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
}

func TestWriterMemoryIsBounded(t *testing.T) {
	r := New("0123456789abcdef")
	w := r.Writer(io.Discard).(*writer)
	big := bytes.Repeat([]byte("0123456789abcde"), 100_000) // never quite the value
	if _, err := w.Write(big); err != nil {
		t.Fatal(err)
	}
	if len(w.held) >= r.maxLen || cap(w.held) > chunkSize+r.maxLen || cap(w.out) > 4*chunkSize {
		t.Fatalf("held %d bytes (cap %d), out cap %d", len(w.held), cap(w.held), cap(w.out))
	}
}

type failWriter struct{ n int }

func (f *failWriter) Write(p []byte) (int, error) {
	f.n++
	return 0, errors.New("disk full")
}

func TestWriterReportsTheUnderlyingError(t *testing.T) {
	fw := &failWriter{}
	w := New("secret-value").Writer(fw)
	if n, err := w.Write([]byte("hello")); err == nil || n != 0 {
		t.Fatalf("Write = %d, %v; want 0 and the error", n, err)
	}
	if _, err := w.Write([]byte("again")); err == nil || fw.n != 1 {
		t.Fatalf("the error must stick (err %v, %d writes)", err, fw.n)
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close must report the error")
	}
}

func TestEmptyRedactorWriterPassesThrough(t *testing.T) {
	var out bytes.Buffer
	w := New("abc").Writer(&out)
	w.Write([]byte("abc"))
	if out.String() != "abc" || w.Close() != nil {
		t.Fatalf("got %q", out.String())
	}
}

func BenchmarkReplace(b *testing.B) {
	r := New("ghp_0123456789abcdefghijklmnopqrstuvwxyz", "hunter2-password", "s3cr3t-value")
	line := "time=2025-01-01T00:00:00Z level=INFO msg=\"tool call finished\" tool=repo.readFile session=abc123 correlation=def456 ms=12"
	b.Run("nomatch", func(b *testing.B) {
		for b.Loop() {
			_ = r.Replace(line)
		}
	})
	withSecret := line + " token=ghp_0123456789abcdefghijklmnopqrstuvwxyz"
	b.Run("match", func(b *testing.B) {
		for b.Loop() {
			_ = r.Replace(withSecret)
		}
	})
}
