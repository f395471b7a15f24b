package framing

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// TestDuplicateMembersRefused: a message that names a member twice, or
// names one of the envelope's, params' or _meta's members in two cases,
// is refused before anyone reads it, by Stream (stdio) and by Decode
// (HTTP) alike, with the member named in the error.
func TestDuplicateMembersRefused(t *testing.T) {
	for _, tc := range []struct {
		in   string
		id   string // the answer's raw id
		code int64
		msg  string
	}{
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"repo.listDir","NAME":"secretcmd"}}`,
			"1", -32602, `invalid params: duplicate member "name" (also as "NAME") in params`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","name":"b"}}`,
			"1", -32602, `invalid params: duplicate member "name" in params`},
		{`{"jsonrpc":"2.0","id":"x","method":"resources/read","params":{"uri":"a","Uri":"b"}}`,
			`"x"`, -32602, `invalid params: duplicate member "uri" (also as "Uri") in params`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","Params":{"name":"a","NAME":"b"}}`,
			"1", -32602, `invalid params: duplicate member "name" (also as "NAME") in Params`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","_meta":{"progressToken":1,"ProgressToken":2}}}`,
			"1", -32602, `invalid params: duplicate member "progressToken" (also as "ProgressToken") in params._meta`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","arguments":{"p":1,"p":2}}}`,
			"1", -32602, `invalid params: duplicate member "p" in params.arguments`},
		{`{"jsonrpc":"2.0","id":1,"method":"tools/list","METHOD":"tools/call"}`,
			"1", -32600, `invalid request: duplicate member "method" (also as "METHOD")`},
		{`{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}`,
			"null", -32600, `invalid request: duplicate member "id"`},
		{`{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"ping"}`,
			"1", -32600, `invalid request: duplicate member "jsonrpc"`},
	} {
		_, replies := drain(t, tc.in+"\n", Options{}, false)
		if len(replies) != 1 {
			t.Fatalf("%s: replies %q", tc.in, replies)
		}
		_, rej := Decode([]byte(tc.in))
		if rej == nil {
			t.Fatalf("Decode(%s) accepted it", tc.in)
		}
		for _, line := range []string{replies[0], string(rej.Reply())} {
			var r struct {
				ID    json.RawMessage `json:"id"`
				Error struct {
					Code    int64  `json:"code"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			if string(r.ID) != tc.id || r.Error.Code != tc.code || r.Error.Message != tc.msg {
				t.Errorf("%s:\n got %s\nwant id %s, %d %q", tc.in, line, tc.id, tc.code, tc.msg)
			}
		}
	}
}

// TestDuplicateMembersAllowedWhereTheyMayDiffer: below params and _meta,
// names that differ only in case are different members (a tool's schema
// may have id and ID); and a downstream server's stream (upstream) takes
// its peer's messages as they come.
func TestDuplicateMembersAllowedWhereTheyMayDiffer(t *testing.T) {
	for _, in := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"id":1,"ID":2,"o":{"a":1,"A":2}}}}`,
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","_meta":{"dev.x/y":{"k":1,"K":2}}}}`,
		`{"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"x"}],"structuredContent":{"id":1,"ID":2}}}`,
	} {
		if got, replies := drain(t, in+"\n", Options{}, false); len(got) != 1 || len(replies) != 0 {
			t.Errorf("%s: got %q, replies %q", in, got, replies)
		}
		if _, rej := Decode([]byte(in)); rej != nil {
			t.Errorf("Decode(%s): %v", in, rej)
		}
	}
	dup := `{"jsonrpc":"2.0","id":1,"result":{"content":[],"content":[]}}`
	if got, replies := drain(t, dup+"\n", Options{AllowDuplicateMembers: true}, false); len(got) != 1 || len(replies) != 0 {
		t.Errorf("AllowDuplicateMembers: got %q, replies %q", got, replies)
	}
}

// TestDuplicateMembersUnanswered: a response or a notification is never
// answered, also when refused for a repeated member; the next message
// still gets through.
func TestDuplicateMembersUnanswered(t *testing.T) {
	input := strings.Join([]string{
		`{"jsonrpc":"2.0","id":1,"result":{"action":"accept","ACTION":"decline"}}`,
		`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"requestId":2}}`,
		`{"jsonrpc":"2.0","id":"1","error":{"code":1,"code":2,"message":"x"}}`,
		`{"jsonrpc":"2.0","id":3,"method":"ping"}`,
	}, "\n") + "\n"
	got, replies := drain(t, input, Options{}, false)
	if len(replies) != 0 || len(got) != 1 || !strings.Contains(got[0], `"ping"`) {
		t.Fatalf("got %q, replies %q", got, replies)
	}
	// In a batch (2025-03-26) a refused member is answered in the batch's
	// array, beside the answers of the others.
	var out bytes.Buffer
	st := New(strings.NewReader(`[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a","NAME":"b"}},`+
		`{"jsonrpc":"2.0","id":2,"method":"ping"}]`+"\n"), &out, Options{})
	st.SetBatches(true)
	var handed []json.RawMessage
	for {
		var m json.RawMessage
		if err := st.ReadObject(&m); err != nil {
			break
		}
		handed = append(handed, m)
	}
	if len(handed) != 1 || !strings.Contains(string(handed[0]), `"ping"`) {
		t.Fatalf("batch: handed on %q", handed)
	}
	res := json.RawMessage(`{}`)
	if err := st.WriteObject(&jsonrpc2.Response{ID: jsonrpc2.ID{Num: 2}, Result: &res}); err != nil {
		t.Fatal(err)
	}
	var arr []struct {
		ID    json.RawMessage `json:"id"`
		Error *struct {
			Code    int64  `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(out.Bytes(), &arr); err != nil || len(arr) != 2 || arr[0].Error == nil ||
		arr[0].Error.Code != -32602 || string(arr[0].ID) != "1" || !strings.Contains(arr[0].Error.Message, `"NAME"`) {
		t.Fatalf("batch answer: %s (%v)", out.String(), err)
	}
}

// BenchmarkDecode is the HTTP front's check and decoding of one tools/call
// (the stdio stream's is the same classify); the duplicate-member scan is
// a part of it.
func BenchmarkDecode(b *testing.B) {
	msg := []byte(`{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"repo.readFile",` +
		`"arguments":{"path":"src/main.go"},"_meta":{"progressToken":"p-42"}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, rej := Decode(msg); rej != nil {
			b.Fatal(rej)
		}
	}
}
