package actors

import (
	"strconv"
	"strings"
	"testing"

	"troupe/protocol"
)

// What a client says about itself is bounded where a session would keep
// it: clientInfo's strings, the capabilities, initialize's and a call's
// _meta, and the same in a 2026-07-28 request's _meta. Over a limit the
// request gets -32602 naming the field and the limit, and the session can
// still initialize with sane values.
func TestClientStringsBounded(t *testing.T) {
	c := newClient(t, Options{}, echoTool())
	long := func(n int) string { return strings.Repeat("x", n) }
	refused := func(id any, method string, params map[string]any, field string, limit int) {
		t.Helper()
		c.request(id, method, params)
		m := c.recv()
		if m.Error == nil || m.Error.Code != protocol.CodeInvalidParams {
			t.Fatalf("%s with %s over %d bytes: %s", method, field, limit, shorten(m.raw))
		}
		if want := field + " is "; !strings.Contains(m.Error.Message, want) ||
			!strings.Contains(m.Error.Message, "at most "+strconv.Itoa(limit)+" bytes") {
			t.Fatalf("%s: the error does not name %s and its limit %d: %q", method, field, limit, m.Error.Message)
		}
	}
	initParams := func(info map[string]any, caps any, meta any) map[string]any {
		p := map[string]any{"protocolVersion": "2025-06-18", "capabilities": caps, "clientInfo": info}
		if meta != nil {
			p["_meta"] = meta
		}
		return p
	}
	ok := map[string]any{"name": "test", "version": "1"}
	for _, f := range []struct {
		field string
		limit int
	}{{"name", 256}, {"title", 256}, {"version", 256}, {"description", 2048}, {"websiteUrl", 2048}} {
		info := map[string]any{"name": "test", "version": "1", f.field: long(f.limit + 1)}
		refused("i-"+f.field, "initialize", initParams(info, map[string]any{}, nil), "clientInfo."+f.field, f.limit)
	}
	refused("i-caps", "initialize", initParams(ok, map[string]any{"experimental": map[string]any{"x": long(64 << 10)}}, nil),
		"capabilities", 64<<10)
	refused("i-meta", "initialize", initParams(ok, map[string]any{}, map[string]any{"x": long(128 << 10)}), "_meta", 128<<10)

	// At the limits, initialize works.
	c.request(0, "initialize", initParams(map[string]any{"name": long(256), "version": long(256)},
		map[string]any{"elicitation": map[string]any{}, "experimental": map[string]any{"x": long(60 << 10)}},
		map[string]any{"x": long(100 << 10)}))
	if m := c.recv(); m.Error != nil {
		t.Fatalf("initialize at the limits: %s", shorten(m.raw))
	}
	c.notify("notifications/initialized", nil)

	refused("call-meta", "tools/call", map[string]any{"name": "echo", "_meta": map[string]any{"x": long(128 << 10)}}, "_meta", 128<<10)
	c.request("call", "tools/call", map[string]any{"name": "echo", "_meta": map[string]any{"x": long(100 << 10)}})
	if m := c.recv(); m.Error != nil {
		t.Fatalf("a call with a large _meta within the limit: %s", shorten(m.raw))
	}

	// 2026-07-28: the same limits on what each request's _meta says.
	modern := func(info map[string]any, caps map[string]any) map[string]any {
		return map[string]any{"_meta": map[string]any{
			protocol.MetaProtocolVersion: "2026-07-28", protocol.MetaClientInfo: info, protocol.MetaClientCapabilities: caps}}
	}
	refused("m-name", "tools/list", modern(map[string]any{"name": long(257), "version": "1"}, map[string]any{}),
		"_meta."+protocol.MetaClientInfo+".name", 256)
	refused("m-caps", "tools/list", modern(ok, map[string]any{"experimental": map[string]any{"x": long(64 << 10)}}),
		"_meta."+protocol.MetaClientCapabilities, 64<<10)
	c.request("m-ok", "tools/list", modern(ok, map[string]any{}))
	if m := c.recv(); m.Error != nil {
		t.Fatalf("2026-07-28 tools/list: %s", shorten(m.raw))
	}
}

// shorten keeps a failure message readable when it echoes a long line.
func shorten(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}
