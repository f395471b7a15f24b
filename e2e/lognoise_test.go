package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// What an operator reads (issue 24, item 6): no info line about the
// approval key on every HTTP start, a failed reload said one problem a
// line, and the metrics' outcome in the words the tool result uses.

// An HTTP server without approvals.state_key says so at debug only: it is
// the usual single-process setup, not news at every start.
func TestHTTPStartWithoutStateKeyIsQuietAtInfo(t *testing.T) {
	fx := newFixture(t)
	srv := startHTTPServer(t, fx.dir, newToken(t), "--log-level", "info")
	if log := srv.log.String(); strings.Contains(log, "approvals.state_key is not set") {
		t.Fatalf("the missing state key is logged at info:\n%s", log)
	}
	debug := startHTTPServer(t, fx.dir, newToken(t))
	if !debug.waitLog("approvals.state_key is not set", 5*time.Second) {
		t.Fatalf("the missing state key is not logged at debug either:\n%s", debug.log)
	}
}

// A reload that fails logs one line per problem, each readable as it is,
// not one line whose problems are joined by escaped newlines.
func TestFailedReloadLogsOneLinePerProblem(t *testing.T) {
	fx := newFixture(t)
	file := filepath.Join(t.TempDir(), "config.toml")
	if err := os.WriteFile(file, []byte("[tools]\ndeny = []\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, fx.dir, "--config", file)
	s.initialize("2025-06-18")
	bad := "[limits]\ncall_timout = \"1s\"\n\n[tools]\ndenny = []\n"
	if err := os.WriteFile(file, []byte(bad), 0o600); err != nil {
		t.Fatal(err)
	}
	for end := time.Now().Add(5 * time.Second); !strings.Contains(s.stderrText(), "keeping the last good configuration"); {
		if time.Now().After(end) {
			t.Fatalf("the bad edit was not logged:\n%s", s.stderrText())
		}
		time.Sleep(20 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // the problem lines follow the summary
	var problems []string
	for _, line := range strings.Split(s.stderrText(), "\n") {
		if !strings.Contains(line, "config reload") {
			continue
		}
		if strings.Contains(line, `\n`) {
			t.Errorf("a reload log line holds escaped newlines: %s", line)
		}
		if strings.Contains(line, "limits.call_timout") || strings.Contains(line, "tools.denny") {
			problems = append(problems, line)
		}
	}
	if len(problems) != 2 || strings.Contains(problems[0], "tools.denny") == strings.Contains(problems[1], "tools.denny") {
		t.Fatalf("want one log line for each of the 2 problems, got %d:\n%s", len(problems), strings.Join(problems, "\n"))
	}
}

// A call of a tool that does not exist is counted with the outcome its
// result names (not_found), not a word of the metrics' own.
func TestUnknownToolCountsAsNotFound(t *testing.T) {
	fx := newFixture(t)
	token := newToken(t)
	srv := startHTTPServer(t, fx.dir, token)
	s := openSession(t, srv)
	answer := s.call(t, 2, "no.such.tool")
	if !strings.Contains(answer, "kind: not_found") {
		t.Fatalf("calling an unknown tool: %s", answer)
	}
	s.end(t)
	want := map[string]string{"tool": "unknown", "outcome": "not_found", "era": "legacy", "identity": "token:default"}
	for end := time.Now().Add(5 * time.Second); counter(scrape(t, srv), "troupe_calls_total", want) != 1; {
		if time.Now().After(end) {
			_, body := adminGet(t, srv, "/metrics")
			var lines []string
			for _, l := range strings.Split(string(body), "\n") {
				if strings.HasPrefix(l, "troupe_calls_total") {
					lines = append(lines, l)
				}
			}
			t.Fatalf("troupe_calls_total%v is not 1:\n%s", want, strings.Join(lines, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
}
