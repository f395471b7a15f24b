package modern

import (
	"net/http"
	"strings"
	"testing"
)

// A client pinned to 2025-11-25 still gets the session-based revision from
// the same troupe: initialize, no discover, a session id over HTTP, and the
// same tools.
func TestLegacyClient(t *testing.T) {
	legacy := []struct {
		ck clientKind
		o  connectOptions
	}{
		{clients[0], connectOptions{version: legacyVersion}},
		{clients[1], connectOptions{version: legacyVersion, legacy: true}},
	}
	for _, l := range legacy {
		t.Run(l.ck.name, func(t *testing.T) {
			forEachTransport(t, func(t *testing.T, fx fixture, tg *target) {
				s, rec := mustConnect(t, tg, l.ck, l.o)
				if v := s.Version(); v != legacyVersion {
					t.Fatalf("negotiated version %q, want %q", v, legacyVersion)
				}
				if d := rec.all("server/discover"); len(d) != 0 {
					t.Errorf("a client pinned to %s sent server/discover: %s", legacyVersion, describe(d))
				}
				init := rec.last("initialize")
				if init == nil {
					t.Fatal("no initialize on the wire")
				}
				if tg.http != nil && (init.Status != http.StatusOK || init.RespHeader.Get("Mcp-Session-Id") == "") {
					t.Errorf("initialize over HTTP: status %d, session id %q; want 200 and a session",
						init.Status, init.RespHeader.Get("Mcp-Session-Id"))
				}
				names, err := s.ListTools(ctxFor(t))
				if err != nil {
					t.Fatalf("tools/list: %v", err)
				}
				for _, want := range troupeTools {
					if !strings.Contains(strings.Join(names, " "), want) {
						t.Errorf("tools/list %v lacks %s", names, want)
					}
				}
				res, err := s.CallTool(ctxFor(t), "repo.readFile", map[string]any{"path": "README.md"}, nil)
				if err != nil || res.IsError || readFileContent(res.Text) != fx.readme {
					t.Fatalf("repo.readFile: %+v, %v", res, err)
				}
			})
		})
	}
}

// One troupe over HTTP serves both eras at once: a legacy session stays
// usable while modern clients come and go on the same endpoint, and the
// modern requests mint no session.
func TestBothErasOneServer(t *testing.T) {
	fx := newFixture(t)
	tg := &target{name: "http", dir: fx.dir, http: startHTTPServer(t, fx.dir)}
	legacy, _ := mustConnect(t, tg, clients[0], connectOptions{version: legacyVersion})
	if v := legacy.Version(); v != legacyVersion {
		t.Fatalf("legacy client negotiated %q, want %q", v, legacyVersion)
	}
	read := func(who string, s session) {
		t.Helper()
		res, err := s.CallTool(ctxFor(t), "repo.readFile", map[string]any{"path": "README.md"}, nil)
		if err != nil || res.IsError || readFileContent(res.Text) != fx.readme {
			t.Fatalf("%s: repo.readFile: %+v, %v", who, res, err)
		}
	}
	read("legacy", legacy)
	for _, ck := range clients {
		modern, rec := connectModern(t, tg, ck)
		read(ck.name+" (2026-07-28)", modern)
		read("legacy, after "+ck.name, legacy)
		for _, ex := range rec.all("") {
			checkHTTP(t, ex, http.StatusOK)
		}
	}
}
