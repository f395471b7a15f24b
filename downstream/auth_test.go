package downstream_test

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"troupe/downstream"
)

// A server that answers 401 is an *AuthError that names the variable the
// token came from, never the token nor the server's answer; a variable
// that is unset sends nothing at all.
func TestHTTPRefusalIsAuthError(t *testing.T) {
	const secret = "s3cret-token-value"
	var requests atomic.Int32
	url := troupeServerWrapped(t, secret, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			requests.Add(1)
			h.ServeHTTP(w, r)
		})
	}, echoTool())

	cfg := httpConfig(url, nil)
	cfg.BearerToken, cfg.CredentialVars = "wrong-"+secret, []string{"REMOTE_TOKEN"}
	_, err := downstream.Dial(context.Background(), cfg, downstream.Handlers{})
	auth, ok := downstream.AsAuthError(err)
	if !ok || auth.Status != http.StatusUnauthorized {
		t.Fatalf("a wrong token: %v", err)
	}
	if msg := auth.Error(); !strings.Contains(msg, "HTTP 401") || !strings.Contains(msg, "REMOTE_TOKEN") ||
		strings.Contains(msg, secret) || strings.Contains(msg, "invalid bearer token") {
		t.Errorf("the hint: %q", msg)
	}

	cfg.BearerToken, cfg.CredentialVars = "", nil
	_, err = downstream.Dial(context.Background(), cfg, downstream.Handlers{})
	if auth, ok := downstream.AsAuthError(err); !ok || !strings.Contains(auth.Error(), "set bearer_token_env_var in [mcp_servers.remote]") {
		t.Errorf("no token configured: %v", err)
	}

	before := requests.Load()
	cfg.CredentialVars, cfg.MissingVars = []string{"REMOTE_TOKEN"}, []string{"REMOTE_TOKEN"}
	_, err = downstream.Dial(context.Background(), cfg, downstream.Handlers{})
	if auth, ok := downstream.AsAuthError(err); !ok || auth.Status != 0 ||
		!strings.Contains(auth.Error(), "set the environment variable REMOTE_TOKEN") {
		t.Errorf("an unset variable: %v", err)
	}
	if requests.Load() != before {
		t.Errorf("troupe sent requests without the credential")
	}
}

// The supervised server shows as unauthenticated, with the hint alone as
// its error; a call while it is fails with that error.
func TestSupervisorUnauthenticatedState(t *testing.T) {
	url := troupeServer(t, "right", echoTool())
	cfg := httpConfig(url, nil)
	cfg.BearerToken, cfg.CredentialVars = "wrong", []string{"REMOTE_TOKEN"}
	d := downstream.Start(testRuntime(t), downstream.Spec{Config: cfg, StartupTimeout: 10 * time.Second})
	defer d.Stop()
	if late := downstream.AwaitStartup(context.Background(), []*downstream.Server{d}, 10*time.Second); len(late) > 0 {
		t.Fatal("the first attempt did not end")
	}
	state, _, err := d.State()
	if state != downstream.StateUnauthenticated || err == nil || strings.HasPrefix(err.Error(), "upstream") {
		t.Fatalf("state %s, err %v", state, err)
	}
	_, err = d.CallTool(context.Background(), "echo", nil, downstream.Observer{})
	if _, ok := downstream.AsAuthError(err); !ok {
		t.Errorf("a call to the unauthenticated server: %v", err)
	}
}
