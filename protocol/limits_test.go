package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestCheckSizesNamesTheFieldAndTheLimit(t *testing.T) {
	long := func(n int) string { return strings.Repeat("a", n) }
	ok := Implementation{Name: long(256), Title: long(256), Version: long(256), Description: long(2048), WebsiteURL: long(2048)}
	if err := (InitializeParams{ClientInfo: &ok, Capabilities: json.RawMessage(`{"x":"` + long(64<<10-8) + `"}`),
		Meta: json.RawMessage(`{"x":"` + long(128<<10-8) + `"}`)}).CheckSizes(); err != nil {
		t.Fatalf("at the limits: %v", err)
	}
	for _, c := range []struct {
		p    InitializeParams
		want string
	}{
		{InitializeParams{ClientInfo: &Implementation{Name: long(257)}}, "clientInfo.name is 257 bytes; at most 256 bytes are accepted"},
		{InitializeParams{ClientInfo: &Implementation{Title: long(300)}}, "clientInfo.title is 300 bytes; at most 256 bytes are accepted"},
		{InitializeParams{ClientInfo: &Implementation{Version: long(257)}}, "clientInfo.version is 257 bytes"},
		{InitializeParams{ClientInfo: &Implementation{Description: long(2049)}}, "clientInfo.description is 2049 bytes; at most 2048"},
		{InitializeParams{ClientInfo: &Implementation{WebsiteURL: long(2049)}}, "clientInfo.websiteUrl is 2049 bytes"},
		{InitializeParams{Capabilities: json.RawMessage(long(64<<10 + 1))}, "capabilities is 65537 bytes; at most 65536 bytes are accepted"},
		{InitializeParams{Meta: json.RawMessage(long(128<<10 + 1))}, "_meta is 131073 bytes; at most 131072 bytes are accepted"},
	} {
		err := c.p.CheckSizes()
		var le *LimitError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("got %v, want %q", err, c.want)
		}
	}
}

func TestReadStatelessMetaBoundsClientInfoAndCapabilities(t *testing.T) {
	parse := func(info, caps string) *MetaError {
		raw := json.RawMessage(`{"_meta":{"` + MetaProtocolVersion + `":"2026-07-28","` + MetaClientCapabilities + `":` + caps +
			`,"` + MetaClientInfo + `":` + info + `}}`)
		_, err := statelessMetaOf(&raw)
		return err
	}
	if err := parse(`{"name":"`+strings.Repeat("n", 256)+`","version":"1"}`, `{}`); err != nil {
		t.Fatalf("a 256-byte name: %v", err)
	}
	err := parse(`{"name":"`+strings.Repeat("n", 257)+`","version":"1"}`, `{}`)
	if err == nil || err.Code != CodeInvalidParams || !strings.Contains(err.Message, "_meta."+MetaClientInfo+".name is 257 bytes") {
		t.Fatalf("a 257-byte name: %v", err)
	}
	err = parse(`{"name":"c","version":"1"}`, `{"experimental":{"x":"`+strings.Repeat("x", 64<<10)+`"}}`)
	if err == nil || err.Code != CodeInvalidParams || !strings.Contains(err.Message, "_meta."+MetaClientCapabilities+" is ") {
		t.Fatalf("capabilities over 64 KiB: %v", err)
	}
}

// Essential keeps a few bytes, and every question troupe asks of
// capabilities has the same answer as for what the client sent.
func TestEssentialCapabilitiesAnswerAlike(t *testing.T) {
	url := func(c ClientCapabilities) bool { // as actors' urlElicitation asks
		if c.Elicitation == nil {
			return false
		}
		var modes map[string]json.RawMessage
		if json.Unmarshal(*c.Elicitation, &modes) != nil {
			return false
		}
		_, ok := modes["url"]
		return ok
	}
	for _, sent := range []string{
		`{}`, `{"elicitation":{}}`, `{"elicitation":{"form":{}}}`, `{"elicitation":{"url":{"x":1}}}`,
		`{"elicitation":{"form":{"a":"` + strings.Repeat("a", 1000) + `"},"url":{},"other":{}}}`,
		`{"elicitation":{"other":{}}}`, `{"elicitation":true}`, `{"elicitation":[]}`, `{"elicitation":null}`,
		`{"sampling":{"tools":{}}}`, `{"roots":{"listChanged":true}}`, `{"sampling":null,"roots":{}}`,
		`{"experimental":{"x":"` + strings.Repeat("x", 10000) + `"}}`,
	} {
		var c ClientCapabilities
		if err := json.Unmarshal([]byte(sent), &c); err != nil {
			t.Fatalf("%s: %v", sent, err)
		}
		e := c.Essential()
		if e.FormElicitation() != c.FormElicitation() || url(e) != url(c) ||
			(e.Sampling != nil) != (c.Sampling != nil) || (e.Roots != nil) != (c.Roots != nil) {
			t.Errorf("%.60s: essential %+v answers otherwise", sent, e)
		}
		if b, _ := json.Marshal(e); len(b) > 80 {
			t.Errorf("%.60s: keeps %d bytes: %s", sent, len(b), b)
		}
	}
}
