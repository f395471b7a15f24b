package mcphttp

import (
	"net/http"
	"strings"
	"testing"

	"troupe/protocol"
)

// In a session, MCP-Protocol-Version may name any revision troupe speaks,
// not only the negotiated one, as the reference SDKs allow (the official
// conformance suite's multiple-streams scenario sends 2025-03-26 whatever
// was negotiated). A value troupe does not speak is refused with 400 and
// a message that quotes it and lists the revisions a session speaks, on
// POST, GET and DELETE alike; the stateless revision is refused in a
// session too, with a message saying it has none.
func TestVersionHeaderNamesAnySupportedRevision(t *testing.T) {
	r := newRig(t, rigConfig{})
	const ping = `{"jsonrpc":"2.0","id":1,"method":"ping"}`
	for _, negotiated := range []string{"2025-06-18", "2025-11-25"} {
		id := r.initialize(negotiated)
		for _, v := range protocol.SupportedVersions() {
			resp, body := r.post(id, ping, "MCP-Protocol-Version", string(v))
			if resp.StatusCode != http.StatusOK || !sameBody(body, []byte(`{"jsonrpc":"2.0","id":1,"result":{}}`)) {
				t.Errorf("session %s, header %s: %d %s", negotiated, v, resp.StatusCode, body)
			}
		}
		// The session keeps its negotiated revision: a header changes nothing.
		if got := r.session(id).Version(); string(got) != negotiated {
			t.Errorf("after the headers the session speaks %s, want %s", got, negotiated)
		}
		for _, bad := range []string{"1999-01-01", "x", "2025-6-18", "2026-07-28x", "2026-07-28", strings.Repeat("9", 300)} {
			for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
				body := ""
				if method == http.MethodPost {
					body = ping
				}
				resp := r.do(method, id, body, "MCP-Protocol-Version", bad)
				got := readAll(t, resp)
				if resp.StatusCode != http.StatusBadRequest {
					t.Fatalf("%s with header %q: %d %s", method, bad, resp.StatusCode, got)
				}
				checkRefusal(t, resp, got, -32000)
				msg := string(got)
				if bad == "2026-07-28" && !strings.Contains(msg, "has no sessions") {
					t.Errorf("%s with header %q: %s", method, bad, got)
				}
				if !strings.Contains(msg, "MCP-Protocol-Version") || !strings.Contains(msg, "2024-11-05") ||
					!strings.Contains(msg, string(protocol.Latest)) {
					t.Errorf("%s with header %q: the refusal names neither the header nor the supported revisions: %s", method, bad, got)
				}
			}
		}
		r.deleteSession(id) // the refused DELETEs left the session alive
	}
}
