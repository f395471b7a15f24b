package protocol

import (
	"encoding/json"
	"strings"
	"testing"
)

func raw(s string) *json.RawMessage { r := json.RawMessage(s); return &r }

func TestStatelessRevisionInTheTable(t *testing.T) {
	v := V20260728
	if !v.Supported() || !v.IsStateless() || v.HasHandshake() || !v.HasResultType() || !v.HasCacheHints() ||
		!v.HasServerInfoMeta() || v.HasElicitation() || !v.HasStructuredContent() {
		t.Fatalf("2026-07-28 features wrong")
	}
	for _, old := range SupportedVersions() {
		if old.IsStateless() || !old.HasHandshake() || old.HasResultType() {
			t.Errorf("%s: handshake revision reports stateless features", old)
		}
	}
	// initialize never negotiates the stateless revision.
	if got := Negotiate("2026-07-28"); got != Latest {
		t.Fatalf("Negotiate(2026-07-28) = %s, want the latest handshake revision", got)
	}
	if AllVersions()[0] != V20260728 {
		t.Fatalf("AllVersions must list the newest first")
	}
}

func TestNamesVersion(t *testing.T) {
	for _, tc := range []struct {
		meta string
		want bool
	}{
		{`{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}`, true},
		{`{"io.modelcontextprotocol/protocolVersion":7}`, true},
		{`{"progressToken":1}`, false},
		{`{}`, false},
		{`"io.modelcontextprotocol/protocolVersion"`, false},
		{``, false},
	} {
		if got := NamesVersion(json.RawMessage(tc.meta)); got != tc.want {
			t.Errorf("NamesVersion(%s) = %v", tc.meta, got)
		}
	}
}

// statelessMetaOf reads params as the transport edge does: their _meta,
// or ParamsNotObject for params that are no object.
func statelessMetaOf(params *json.RawMessage) (*StatelessMeta, *MetaError) {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	if params != nil && json.Unmarshal(*params, &p) != nil {
		return nil, ParamsNotObject()
	}
	return ReadStatelessMeta(p.Meta)
}

func TestReadStatelessMeta(t *testing.T) {
	const caps = `"io.modelcontextprotocol/clientCapabilities":{"elicitation":{"form":{}}}`
	m, err := statelessMetaOf(raw(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps +
		`,"io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},"io.modelcontextprotocol/logLevel":"info"}}`))
	if err != nil || m.Version != V20260728 || m.Client.Name != "c" || m.Level == nil || *m.Level != LevelInfo ||
		!m.Caps.FormElicitation() {
		t.Fatalf("ReadStatelessMeta: %+v %v", m, err)
	}
	if m, err := statelessMetaOf(raw(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps + `}}`)); err != nil || m.Level != nil {
		t.Fatalf("without logLevel: %+v %v", m, err)
	}
	for _, tc := range []struct {
		params  string
		code    int64
		mention string
	}{
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01",` + caps + `}}`, CodeUnsupportedVersion, "Unsupported"},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2025-11-25",` + caps + `}}`, CodeUnsupportedVersion, "initialize"},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":7,` + caps + `}}`, CodeInvalidParams, "protocolVersion"},
		{`{"_meta":{` + caps + `}}`, CodeInvalidParams, "protocolVersion"},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}`, CodeInvalidParams, "clientCapabilities"},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":[]}}`, CodeInvalidParams, "clientCapabilities"},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps + `,"io.modelcontextprotocol/logLevel":"loud"}}`, CodeInvalidParams, "logLevel"},
		{`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28",` + caps + `,"io.modelcontextprotocol/clientInfo":"x"}}`, CodeInvalidParams, "clientInfo"},
		{`[]`, CodeInvalidParams, "object"},
	} {
		_, err := statelessMetaOf(raw(tc.params))
		if err == nil || err.Code != tc.code || !strings.Contains(err.Message, tc.mention) {
			t.Errorf("%s: got %v, want %d mentioning %q", tc.params, err, tc.code, tc.mention)
		}
	}
	_, err = statelessMetaOf(raw(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"1900-01-01",` + caps + `}}`))
	data, _ := json.Marshal(err.Data)
	if !strings.Contains(string(data), `"requested":"1900-01-01"`) || !strings.Contains(string(data), `"supported":["2026-07-28"`) {
		t.Fatalf("-32022 data: %s", data)
	}
}

func TestDecorateResult(t *testing.T) {
	info := &Implementation{Name: "troupe", Version: "1"}
	out, err := DecorateResult(json.RawMessage(`{"tools":[],"_meta":{"dev.troupe/x":1}}`),
		Completion{ServerInfo: info, Cache: &CacheHint{TTLMs: 0, Scope: CachePublic}})
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	meta := got["_meta"].(map[string]any)
	if got["resultType"] != "complete" || got["ttlMs"] != float64(0) || got["cacheScope"] != "public" ||
		meta["dev.troupe/x"] != float64(1) || meta[MetaServerInfo].(map[string]any)["name"] != "troupe" {
		t.Fatalf("decorated: %s", out)
	}
	// A result that has its own resultType keeps it; no cache hint for calls.
	out, _ = DecorateResult(json.RawMessage(`{"resultType":"input_required"}`), Completion{})
	if string(out) != `{"resultType":"input_required"}` {
		t.Fatalf("kept: %s", out)
	}
	if _, err := DecorateResult(json.RawMessage(`[]`), Completion{}); err == nil {
		t.Fatal("a non-object result was decorated")
	}
}

func FuzzReadStatelessMeta(f *testing.F) {
	f.Add(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}`)
	f.Add(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"io.modelcontextprotocol/logLevel":"debug"}}`)
	f.Add(`{"_meta":null}`)
	f.Add(`{"_meta":{"io.modelcontextprotocol/protocolVersion":"x"}}`)
	f.Fuzz(func(t *testing.T, params string) {
		m, err := statelessMetaOf(raw(params))
		switch {
		case err == nil && (m == nil || !m.Version.IsStateless()):
			t.Fatalf("accepted %q as %+v", params, m)
		case err != nil && err.Code != CodeInvalidParams && err.Code != CodeUnsupportedVersion:
			t.Fatalf("%q: code %d", params, err.Code)
		case err == nil && !namesVersionIn(params):
			t.Fatalf("%q parsed but does not name a version", params)
		}
	})
}

// namesVersionIn reports whether params' _meta names a protocol version.
func namesVersionIn(params string) bool {
	var p struct {
		Meta json.RawMessage `json:"_meta"`
	}
	return json.Unmarshal([]byte(params), &p) == nil && NamesVersion(p.Meta)
}
