package downstream

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// StateUnauthenticated is the state of a server that asked for a
// credential troupe does not have or that it refused: troupe keeps trying
// (a token fixed on the server's side is taken up at the next attempt),
// and a reload that names a variable that is set starts it afresh.
const StateUnauthenticated = "unauthenticated"

// AuthError is a server that wants a credential troupe cannot give it:
// the environment variables troupe's credential for it comes from are
// unset or empty (Status 0, nothing was sent), or the server answered
// HTTP 401 or 403. Its message is fit for a client and the log: it names
// the variables to set, never their values, and never quotes what the
// server answered (a refusal's body may echo the token).
type AuthError struct {
	// Server is the server's name in the configuration.
	Server string
	// Status is the server's HTTP status, 401 or 403; 0 when troupe had
	// no credential to send.
	Status int
	// Vars name the environment variables troupe's credential for the
	// server comes from (Config.CredentialVars); with Status 0, those
	// that are unset or empty.
	Vars []string
}

func (e *AuthError) Error() string {
	vars := strings.Join(e.Vars, ", ")
	plural := "variable"
	if len(e.Vars) > 1 {
		plural = "variables"
	}
	switch {
	case e.Status == 0:
		return fmt.Sprintf("server %s needs a credential troupe does not have: set the environment %s %s (unset or empty)",
			e.Server, plural, vars)
	case len(e.Vars) > 0:
		return fmt.Sprintf("server %s refused troupe's credential (HTTP %d %s): check the token in the environment %s %s",
			e.Server, e.Status, http.StatusText(e.Status), plural, vars)
	}
	return fmt.Sprintf("server %s requires a credential (HTTP %d %s): set bearer_token_env_var in [mcp_servers.%s] to the name of the environment variable that holds its token",
		e.Server, e.Status, http.StatusText(e.Status), e.Server)
}

// authStatus reports whether an HTTP status means the server wants a
// credential troupe did not give it.
func authStatus(code int) bool {
	return code == http.StatusUnauthorized || code == http.StatusForbidden
}

// authError is the client's *AuthError for a refusal with status code.
func (c *Client) authError(code int) *AuthError {
	return &AuthError{Server: c.name, Status: code, Vars: c.credentialVars}
}

// AsAuthError returns err's *AuthError, if it holds one.
func AsAuthError(err error) (*AuthError, bool) {
	var auth *AuthError
	ok := errors.As(err, &auth)
	return auth, ok
}
