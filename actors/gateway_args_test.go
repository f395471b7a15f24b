package actors

import (
	"encoding/json"
	"testing"
)

// appendMember adds troupe's member after the client's, so a reader (which
// takes the last of equal names) sees troupe's, without decoding the
// params again.
func TestAppendMember(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{``, `{"stateless":true}`},
		{`null`, `{"stateless":true}`},
		{`{}`, `{"stateless":true}`},
		{`{ }`, `{ "stateless":true}`},
		{`{"name":"p"}`, `{"name":"p","stateless":true}`},
		{`{"stateless":false,"a":{"b":"}"}}`, `{"stateless":false,"a":{"b":"}"},"stateless":true}`},
	} {
		got := appendMember(json.RawMessage(tc.in), "stateless", "true")
		if string(got) != tc.want {
			t.Errorf("appendMember(%s) = %s, want %s", tc.in, got, tc.want)
		}
		var p struct {
			Stateless bool `json:"stateless"`
		}
		if err := json.Unmarshal(got, &p); err != nil || !p.Stateless {
			t.Errorf("%s: reads as %+v (%v)", got, p, err)
		}
	}
}
