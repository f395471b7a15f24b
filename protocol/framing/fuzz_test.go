package framing

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzStream feeds arbitrary input followed by one known-good request and
// checks the framing invariants: the stream never fails before the end of
// input, every line it writes is a single valid JSON value, and the good
// request after whatever came before is always delivered intact (no
// desynchronisation).
func FuzzStream(f *testing.F) {
	seeds := []string{
		`{"jsonrpc":"2.0","id":1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1,"method":"pi`,
		`{`, `}`, `[`, `[]`, `[{}]`, `null`, `""`, `0`,
		`{"jsonrpc":"2.0","id":null,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":-1,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1.5,"method":"ping"}`,
		`{"jsonrpc":"2.0","id":1}`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]`,
		"{\"a\":\"\xff\xfe\"}",
		`{"jsonrpc":"2.0","id":"x","method":"tools/call","params":{"name":"a","arguments":{"b":[1,2,{"c":null}]}}}`,
		strings.Repeat("x", 5000),
		"\r\n\r\n",
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","NAME":"b","arguments":{"x":1,"x":2}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"action":"accept","action":"decline"}}`,
	}
	for _, s := range seeds {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	const good = `{"jsonrpc":"2.0","id":"sentinel","method":"ping"}`
	f.Fuzz(func(t *testing.T, data []byte, batches bool) {
		// The fuzzed bytes form whole lines: a newline always ends them, as a
		// peer's next message would.
		input := append(append(bytes.Clone(data), '\n'), good+"\n"...)
		var out bytes.Buffer
		s := New(bytes.NewReader(input), &out, Options{MaxLineBytes: 4096})
		s.SetBatches(batches)
		var last json.RawMessage
		for {
			var m json.RawMessage
			if err := s.ReadObject(&m); err != nil {
				break
			}
			last = m
		}
		if string(last) != good {
			t.Fatalf("sentinel request not delivered last intact; got %q", last)
		}
		for _, line := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
			if line != "" && !json.Valid([]byte(line)) {
				t.Fatalf("stream wrote invalid JSON line %q", line)
			}
		}
	})
}
