package framing

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// message is what jsonrpc2's read loop would decode a line into; the test
// only needs the raw form back.
type message = json.RawMessage

// drain reads every message the stream hands on, and returns them with what
// the stream wrote back by itself.
func drain(t *testing.T, input string, opts Options, batches bool) (got []string, replies []string) {
	t.Helper()
	var out bytes.Buffer
	s := New(strings.NewReader(input), &out, opts)
	s.SetBatches(batches)
	for {
		var m message
		err := s.ReadObject(&m)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("ReadObject: %v", err)
		}
		got = append(got, string(m))
	}
	for _, l := range strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n") {
		if l != "" {
			replies = append(replies, l)
		}
	}
	return got, replies
}

type wantReply struct {
	id   string // raw id as written ("null" for null)
	code int64
}

func parseReply(t *testing.T, line string) wantReply {
	t.Helper()
	var r struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Error   *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		t.Fatalf("reply %q is not JSON: %v", line, err)
	}
	if r.JSONRPC != "2.0" || r.Error == nil || r.Error.Message == "" {
		t.Fatalf("reply %q is not a JSON-RPC error response", line)
	}
	return wantReply{id: string(r.ID), code: r.Error.Code}
}

// A bad response is dropped without a reply: JSON-RPC never answers a
// response, and two peers must not bounce errors at each other.
func TestStreamDropsBadResponsesSilently(t *testing.T) {
	const good = `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	for _, line := range []string{
		`{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"invalid request"}}`,
		`{"jsonrpc":"2.0","error":{"code":-32700,"message":"parse error"}}`,
	} {
		got, replies := drain(t, line+"\n"+good+"\n", Options{MaxLineBytes: 1024}, false)
		if len(got) != 1 || got[0] != good || len(replies) != 0 {
			t.Fatalf("%s: delivered %q, replied %q", line, got, replies)
		}
	}
}

func TestStreamRejectsBadLinesAndKeepsGoing(t *testing.T) {
	const good = `{"jsonrpc":"2.0","id":7,"method":"ping"}`
	cases := []struct {
		name string
		line string
		want wantReply
	}{
		{"garbage", `hello there`, wantReply{"null", jsonrpc2.CodeParseError}},
		{"truncated object", `{"jsonrpc":"2.0","id":1,"method":"pi`, wantReply{"null", jsonrpc2.CodeParseError}},
		{"truncated after brace", `{`, wantReply{"null", jsonrpc2.CodeParseError}},
		{"invalid utf8", "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\xff\"}", wantReply{"null", jsonrpc2.CodeParseError}},
		{"wrong jsonrpc", `{"jsonrpc":"1.0","id":1,"method":"ping"}`, wantReply{"1", jsonrpc2.CodeInvalidRequest}},
		{"missing jsonrpc", `{"id":2,"method":"ping"}`, wantReply{"2", jsonrpc2.CodeInvalidRequest}},
		{"null id", `{"jsonrpc":"2.0","id":null,"method":"ping"}`, wantReply{"null", jsonrpc2.CodeInvalidRequest}},
		{"fractional id", `{"jsonrpc":"2.0","id":1.5,"method":"ping"}`, wantReply{"1.5", jsonrpc2.CodeInvalidRequest}},
		{"exponent id", `{"jsonrpc":"2.0","id":1e3,"method":"ping"}`, wantReply{"1e3", jsonrpc2.CodeInvalidRequest}},
		{"negative id", `{"jsonrpc":"2.0","id":-4,"method":"ping"}`, wantReply{"-4", jsonrpc2.CodeInvalidRequest}},
		{"id out of range", `{"jsonrpc":"2.0","id":18446744073709551616,"method":"ping"}`, wantReply{"18446744073709551616", jsonrpc2.CodeInvalidRequest}},
		{"id beyond int64", `{"jsonrpc":"2.0","id":9223372036854775808,"method":"ping"}`, wantReply{"9223372036854775808", jsonrpc2.CodeInvalidRequest}},
		{"object id", `{"jsonrpc":"2.0","id":{},"method":"ping"}`, wantReply{"null", jsonrpc2.CodeInvalidRequest}},
		{"bool id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, wantReply{"null", jsonrpc2.CodeInvalidRequest}},
		{"numeric method", `{"jsonrpc":"2.0","id":3,"method":5}`, wantReply{"3", jsonrpc2.CodeInvalidRequest}},
		{"string params", `{"jsonrpc":"2.0","id":3,"method":"ping","params":"x"}`, wantReply{"3", jsonrpc2.CodeInvalidRequest}},
		{"neither", `{"jsonrpc":"2.0","id":1}`, wantReply{"1", jsonrpc2.CodeInvalidRequest}},
		{"scalar", `42`, wantReply{"null", jsonrpc2.CodeInvalidRequest}},
		{"string", `"ping"`, wantReply{"null", jsonrpc2.CodeInvalidRequest}},
		{"batch when not allowed", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, wantReply{"null", jsonrpc2.CodeInvalidRequest}},
		{"oversized", `{"jsonrpc":"2.0","id":9,"method":"ping","params":{"pad":"` + strings.Repeat("x", 200) + `"}}`, wantReply{"null", jsonrpc2.CodeInvalidRequest}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, replies := drain(t, c.line+"\n"+good+"\n", Options{MaxLineBytes: 128}, false)
			if len(got) != 1 || got[0] != good {
				t.Fatalf("the good line after the bad one was not delivered intact: %q", got)
			}
			if len(replies) != 1 {
				t.Fatalf("want exactly one error reply, got %q", replies)
			}
			if r := parseReply(t, replies[0]); r != c.want {
				t.Fatalf("reply %s: got id %s code %d, want id %s code %d", replies[0], r.id, r.code, c.want.id, c.want.code)
			}
		})
	}
}

func TestStreamPassesValidMessages(t *testing.T) {
	lines := []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{}}`,
		`{"jsonrpc":"2.0","id":"abc","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/initialized"}`,
		`{"jsonrpc":"2.0","id":0,"result":{}}`,
		`{"jsonrpc":"2.0","id":5,"error":{"code":-1,"message":"no"}}`,
		`  {"jsonrpc":"2.0","id":9223372036854775807,"method":"ping"}  `,
	}
	input := strings.Join(lines, "\r\n") + "\n\n   \n"
	got, replies := drain(t, input, Options{}, false)
	if len(replies) != 0 {
		t.Fatalf("unexpected replies %q", replies)
	}
	if len(got) != len(lines) {
		t.Fatalf("got %d messages, want %d: %q", len(got), len(lines), got)
	}
}

func TestStreamLastLineWithoutNewline(t *testing.T) {
	got, _ := drain(t, `{"jsonrpc":"2.0","id":1,"method":"ping"}`, Options{}, false)
	if len(got) != 1 {
		t.Fatalf("unterminated last line lost: %q", got)
	}
}

func TestStreamOversizedLineLongerThanReadBuffer(t *testing.T) {
	big := `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"p":"` + strings.Repeat("y", 300<<10) + `"}}`
	good := `{"jsonrpc":"2.0","id":2,"method":"ping"}`
	got, replies := drain(t, big+"\n"+good+"\n", Options{MaxLineBytes: 100 << 10}, false)
	if len(got) != 1 || got[0] != good || len(replies) != 1 {
		t.Fatalf("got %q replies %q", got, replies)
	}
	// The same line under a larger limit is accepted whole.
	got, replies = drain(t, big+"\n", Options{MaxLineBytes: 1 << 20}, false)
	if len(got) != 1 || len(got[0]) != len(big) || len(replies) != 0 {
		t.Fatalf("large line under the limit not delivered: %d messages, replies %q", len(got), replies)
	}
}

func TestStreamBatches(t *testing.T) {
	var out bytes.Buffer
	in := `[{"jsonrpc":"2.0","id":1,"method":"ping"},{"jsonrpc":"2.0","method":"notifications/x"},{"jsonrpc":"2.0","id":null,"method":"ping"},{"jsonrpc":"2.0","id":2,"method":"ping"}]` + "\n"
	s := New(strings.NewReader(in), &out, Options{})
	s.SetBatches(true)
	var got []message
	for {
		var m message
		if err := s.ReadObject(&m); err != nil {
			break
		}
		got = append(got, m)
	}
	if len(got) != 3 {
		t.Fatalf("want 3 valid members handed on, got %d", len(got))
	}
	if out.Len() != 0 {
		t.Fatalf("batch answered before its requests: %q", out.String())
	}
	res := json.RawMessage(`{}`)
	if err := s.WriteObject(&jsonrpc2.Response{ID: jsonrpc2.ID{Num: 2}, Result: &res}); err != nil {
		t.Fatal(err)
	}
	if out.Len() != 0 {
		t.Fatalf("batch answered before all its requests: %q", out.String())
	}
	if err := s.WriteObject(&jsonrpc2.Response{ID: jsonrpc2.ID{Num: 1}, Result: &res}); err != nil {
		t.Fatal(err)
	}
	var arr []json.RawMessage
	if err := json.Unmarshal(out.Bytes(), &arr); err != nil || len(arr) != 3 {
		t.Fatalf("want one array of 3 responses (2 results, 1 error), got %q (%v)", out.String(), err)
	}
	if !strings.HasSuffix(out.String(), "]\n") || strings.Count(out.String(), "\n") != 1 {
		t.Fatalf("batch reply must be one line: %q", out.String())
	}
}

func TestStreamBatchSkipAndNotificationsOnly(t *testing.T) {
	var out bytes.Buffer
	in := `[{"jsonrpc":"2.0","method":"notifications/a"},{"jsonrpc":"2.0","method":"notifications/b"}]` + "\n" +
		`[{"jsonrpc":"2.0","id":"c","method":"slow"}]` + "\n" + `[]` + "\n"
	s := New(strings.NewReader(in), &out, Options{})
	s.SetBatches(true)
	for {
		var m message
		if err := s.ReadObject(&m); err != nil {
			break
		}
	}
	// The notifications-only batch gets nothing; the empty batch one error.
	if got := strings.Count(out.String(), "\n"); got != 1 {
		t.Fatalf("want one reply line (for the empty batch), got %q", out.String())
	}
	out.Reset()
	s.Skip(jsonrpc2.ID{Str: "c", IsString: true})
	if out.Len() != 0 {
		t.Fatalf("a batch whose only request was cancelled must get no reply, got %q", out.String())
	}
}

func TestStreamWriteAfterCloseWrite(t *testing.T) {
	var out bytes.Buffer
	s := New(strings.NewReader(""), &out, Options{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteObject(map[string]int{"a": 1}); err != nil {
		t.Fatalf("reader close must not stop writes (drain phase): %v", err)
	}
	if err := s.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteObject(map[string]int{"a": 1}); err == nil {
		t.Fatal("write after CloseWrite succeeded")
	}
}

// TestReadMessageDecodes checks what ReadMessage hands on: jsonrpc2's types,
// filled from the one pass that checked the line.
func TestReadMessageDecodes(t *testing.T) {
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{"text":"a\nb"}}}`,
		`{"jsonrpc":"2.0","id":"s","method":"ping"}`,
		`{"jsonrpc":"2.0","method":"notifications/\u0063ancelled","params":{"requestId":7}}`,
		`{"jsonrpc":"2.0","id":3,"result":{"action":"accept"}}`,
		`{"jsonrpc":"2.0","id":4,"error":{"code":-32601,"message":"no","data":{"x":1}}}`,
		`{"jsonrpc":"2.0","id":5,"error":"not an object"}`,
	}, "\n")
	var out bytes.Buffer
	s := New(strings.NewReader(input), &out, Options{})
	var got []Message
	for {
		m, err := s.ReadMessage()
		if err != nil {
			break
		}
		got = append(got, m)
	}
	if len(got) != 5 || out.Len() != 0 {
		t.Fatalf("got %d messages and replies %q; want 5 and none (a bad response is dropped)", len(got), out.String())
	}
	call := got[0].Request
	if call == nil || call.Method != "tools/call" || call.Notif || call.ID != (jsonrpc2.ID{Num: 7}) ||
		string(*call.Params) != `{"name":"echo","arguments":{"text":"a\nb"}}` {
		t.Fatalf("call: %+v", call)
	}
	if p := got[1].Request; p.Method != "ping" || p.Params != nil || p.ID != (jsonrpc2.ID{Str: "s", IsString: true}) {
		t.Fatalf("ping: %+v", p)
	}
	if n := got[2].Request; n.Method != "notifications/cancelled" || !n.Notif {
		t.Fatalf("notification: %+v", n)
	}
	if r := got[3].Response; r == nil || r.ID != (jsonrpc2.ID{Num: 3}) || string(*r.Result) != `{"action":"accept"}` || r.Error != nil {
		t.Fatalf("result: %+v", r)
	}
	if r := got[4].Response; r.Error == nil || r.Error.Code != -32601 || r.Error.Message != "no" || string(*r.Error.Data) != `{"x":1}` {
		t.Fatalf("error: %+v", r)
	}
}

// countingWriter counts the writes it gets.
type countingWriter struct {
	bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.Buffer.Write(p)
}

// TestQueueSharesOneWrite queues three messages: nothing is written until
// Flush, which writes them in one go; an immediate write in between sends
// the queued ones first, in order.
func TestQueueSharesOneWrite(t *testing.T) {
	var w countingWriter
	s := New(strings.NewReader(""), &w, Options{})
	for i := 1; i <= 3; i++ {
		if err := s.Queue(resp(uint64(i))); err != nil {
			t.Fatal(err)
		}
	}
	if w.writes != 0 {
		t.Fatalf("%d writes before Flush", w.writes)
	}
	if err := s.Flush(); err != nil || w.writes != 1 || strings.Count(w.String(), "\n") != 3 {
		t.Fatalf("Flush: %v, %d writes of %q; want one write of three lines", err, w.writes, w.String())
	}
	s.Queue(resp(4))
	s.WriteObject(resp(5))
	lines := strings.Split(strings.TrimSpace(w.String()), "\n")
	if len(lines) != 5 || !strings.Contains(lines[3], `"id":4`) || !strings.Contains(lines[4], `"id":5`) {
		t.Fatalf("want the queued message before the immediate one, got %q", lines)
	}
	s.Queue(resp(6))
	if err := s.CloseWrite(); err != nil || !strings.Contains(w.String(), `"id":6`) {
		t.Fatalf("CloseWrite must write what is queued: %v %q", err, w.String())
	}
	if err := s.Queue(resp(7)); err == nil {
		t.Fatal("Queue after CloseWrite succeeded")
	}
}

func resp(id uint64) *jsonrpc2.Response {
	result := json.RawMessage(`{}`)
	return &jsonrpc2.Response{ID: jsonrpc2.ID{Num: id}, Result: &result}
}
