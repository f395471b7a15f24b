package e2e

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// initializeAs posts an initialize with token as the bearer credential and
// returns the HTTP status.
func initializeAs(t *testing.T, srv *httpServer, token string) int {
	t.Helper()
	msg := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18",` +
		`"capabilities":{},"clientInfo":{"name":"troupe-e2e-go","version":"0.0.0"}}}`
	resp := srv.request(t, http.MethodPost, strings.NewReader(msg), map[string]string{
		"Authorization": "Bearer " + token,
		"Content-Type":  "application/json",
		"Accept":        "application/json, text/event-stream",
	})
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestNamedTokensFollowReload: a named token is read from the variable
// its token_env names, at start and again at a reload that names another
// variable (the old token is refused from then on, without a restart); a
// reload that names a token "default" beside --bearer-token-env is
// refused and the tokens in force stay; no token reaches the log.
func TestNamedTokensFollowReload(t *testing.T) {
	fx := newFixture(t)
	first, second, flag := newToken(t), newToken(t), newToken(t)
	t.Setenv("E2E_NAMED_TOKEN_ONE", first)
	t.Setenv("E2E_NAMED_TOKEN_TWO", second)
	file := filepath.Join(t.TempDir(), "config.toml")
	write := func(text string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"E2E_NAMED_TOKEN_ONE\"\n")
	srv := startHTTPServer(t, fx.dir, flag, "--config", file)

	if got := initializeAs(t, srv, first); got != http.StatusOK {
		t.Fatalf("the token in E2E_NAMED_TOKEN_ONE: %d, want 200", got)
	}
	if got := initializeAs(t, srv, flag); got != http.StatusOK {
		t.Fatalf("--bearer-token-env's token beside [[auth.tokens]]: %d, want 200", got)
	}
	if got := initializeAs(t, srv, second); got != http.StatusUnauthorized {
		t.Fatalf("a token no entry names: %d, want 401", got)
	}

	reloads := strings.Count(srv.log.String(), "configuration reloaded")
	write("[[auth.tokens]]\nname = \"ci\"\ntoken_env = \"E2E_NAMED_TOKEN_TWO\"\n")
	for deadline := time.Now().Add(10 * time.Second); strings.Count(srv.log.String(), "configuration reloaded") == reloads; {
		if time.Now().After(deadline) {
			t.Fatal("the edit was not reloaded")
		}
		time.Sleep(25 * time.Millisecond)
	}
	if got := initializeAs(t, srv, second); got != http.StatusOK {
		t.Fatalf("after token_env names E2E_NAMED_TOKEN_TWO, its token: %d, want 200", got)
	}
	if got := initializeAs(t, srv, first); got != http.StatusUnauthorized {
		t.Fatalf("after the reload, the token of the former variable: %d, want 401", got)
	}

	write("[[auth.tokens]]\nname = \"default\"\ntoken_env = \"E2E_NAMED_TOKEN_ONE\"\n")
	if !srv.waitLog(`auth.tokens[1].name: \"default\" is the name of the bearer token`, 10*time.Second) {
		t.Fatal("a token named default beside --bearer-token-env was not refused at reload")
	}
	if got := initializeAs(t, srv, second); got != http.StatusOK {
		t.Fatalf("after a refused reload, the token in force: %d, want 200", got)
	}
	if got := initializeAs(t, srv, first); got != http.StatusUnauthorized {
		t.Fatalf("after a refused reload, the refused entry's token: %d, want 401", got)
	}
	for _, tok := range []string{first, second, flag} {
		if strings.Contains(srv.log.String(), tok) {
			t.Fatal("a token is in the log")
		}
	}
}
