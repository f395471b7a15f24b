package framing

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/sourcegraph/jsonrpc2"
)

// encode's direct form of a response is byte for byte what encoding/json
// makes of it through jsonrpc2, for number and string ids; what it cannot
// write directly (errors, invalid or multi-line results) goes through
// encoding/json.
func TestEncodeResponse(t *testing.T) {
	for _, tc := range []struct {
		id     jsonrpc2.ID
		result string
	}{
		{jsonrpc2.ID{Num: 7}, `{"content":[{"type":"text","text":"a\nb"}]}`},
		{jsonrpc2.ID{Str: "a\"b\u2028<>&", IsString: true}, `{}`},
		{jsonrpc2.ID{Num: 1<<63 - 1}, `null`},
	} {
		raw := json.RawMessage(tc.result)
		resp := &jsonrpc2.Response{ID: tc.id, Result: &raw}
		got, err := encode(resp)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(resp)
		if !bytes.Equal(got, want) {
			t.Errorf("encode = %s\nwant     %s", got, want)
		}
	}
	raw := json.RawMessage("{\n}")
	if got, _ := encode(&jsonrpc2.Response{ID: jsonrpc2.ID{Num: 1}, Result: &raw}); bytes.IndexByte(got, '\n') >= 0 {
		t.Errorf("a multi-line result stays multi-line: %q", got)
	}
}
