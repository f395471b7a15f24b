package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// tokenEnv is the variable that carries the bearer token: to troupe
// (--bearer-token-env) and to Codex (bearer_token_env_var) alike.
const tokenEnv = "TROUPE_TOKEN"

const (
	// httpStartTimeout bounds one start of the server, until /healthz
	// answers (a -race build starts slower).
	httpStartTimeout = 30 * time.Second
	// httpStopTimeout is how long the server may take to exit after SIGTERM.
	httpStopTimeout = 15 * time.Second
)

// httpServer is the real troupe binary serving streamable HTTP on a free
// loopback port, logging at debug level into a buffer the test can read
// while it runs. Cleanup stops it with SIGTERM and requires exit status 0.
type httpServer struct {
	base  string // http://127.0.0.1:PORT
	url   string // the MCP endpoint, base + "/mcp"
	token string // the bearer token required, "" for none

	cmd    *exec.Cmd
	log    *lockedWriter
	exited chan struct{} // closed once cmd.Wait has returned
}

// errPortTaken is a start that lost its port to another process between
// freePort and troupe's own listen.
var errPortTaken = errors.New("the port was taken")

// startHTTPServer runs `troupe serve --http` on workspace. A non-empty token
// is required of every MCP request, handed over as troupe's documented way:
// --bearer-token-env and the variable in its environment.
func startHTTPServer(t *testing.T, workspace, token string, extra ...string) *httpServer {
	t.Helper()
	bin := troupeBinary(t)
	var err error
	for range 5 {
		var s *httpServer
		if s, err = tryStartHTTP(bin, workspace, token, extra); err == nil {
			t.Cleanup(func() { s.stop(t) })
			return s
		}
		if !errors.Is(err, errPortTaken) {
			break
		}
	}
	t.Fatalf("starting troupe over HTTP: %v", err)
	return nil
}

func tryStartHTTP(bin, workspace, token string, extra []string) (*httpServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	s := &httpServer{base: "http://" + addr, url: "http://" + addr + "/mcp", token: token,
		log: &lockedWriter{b: &strings.Builder{}}, exited: make(chan struct{})}
	args := append([]string{"serve", "--workspace", workspace, "--http", addr, "--log-level", "debug"}, extra...)
	env := withoutVar(os.Environ(), tokenEnv)
	if token != "" {
		args = append(args, "--bearer-token-env", tokenEnv)
		env = append(env, tokenEnv+"="+token)
	}
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = env
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log // stdout should stay empty
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = s.cmd.Wait()
		close(s.exited)
	}()

	// Ready means troupe logged this very URL (not some other process's
	// server on a reused port) and /healthz answers.
	announced := "serving MCP over HTTP url=" + s.url
	deadline := time.Now().Add(httpStartTimeout)
	for {
		select {
		case <-s.exited:
			if strings.Contains(s.log.String(), "address already in use") {
				return nil, errPortTaken
			}
			return nil, fmt.Errorf("troupe exited with %v before serving; its log:\n%s", s.cmd.ProcessState, s.log)
		case <-time.After(25 * time.Millisecond):
		}
		if strings.Contains(s.log.String(), announced) && s.healthy() {
			return s, nil
		}
		if time.Now().After(deadline) {
			_ = s.cmd.Process.Kill()
			<-s.exited
			return nil, fmt.Errorf("troupe did not serve /healthz within %v; its log:\n%s", httpStartTimeout, s.log)
		}
	}
}

// healthy reports whether GET /healthz answers 200 "ok".
func (s *httpServer) healthy() bool {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.base+"/healthz", nil)
	resp, err := loopbackClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "ok"
}

// stop sends SIGTERM and requires troupe to exit 0 within httpStopTimeout.
// It shows the server's log when the test failed.
func (s *httpServer) stop(t *testing.T) {
	select {
	case <-s.exited:
		t.Errorf("troupe exited before the test ended: %v", s.cmd.ProcessState)
	default:
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-s.exited:
			if code := s.cmd.ProcessState.ExitCode(); code != 0 {
				t.Errorf("troupe exited with %v after SIGTERM, want status 0", s.cmd.ProcessState)
			}
		case <-time.After(httpStopTimeout):
			_ = s.cmd.Process.Kill()
			<-s.exited
			t.Errorf("troupe did not exit within %v of SIGTERM", httpStopTimeout)
		}
	}
	if strings.Contains(s.log.String(), "WARNING: DATA RACE") {
		t.Errorf("the server reported a data race")
	}
	if t.Failed() {
		t.Logf("troupe's log (%s):\n%s", s.base, s.log)
	}
}

// waitLog waits up to timeout for the server's log to contain want.
func (s *httpServer) waitLog(want string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for !strings.Contains(s.log.String(), want) {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(25 * time.Millisecond)
	}
	return true
}

// transport is how runner.mjs reaches s, with the bearer token if any.
func (s *httpServer) transport() transport {
	tr := transport{Kind: "http", URL: s.url}
	if s.token != "" {
		tr.Headers = map[string]string{"Authorization": "Bearer " + s.token}
	}
	return tr
}

// loopbackClient talks to the server under test directly, never through a
// proxy from the environment.
var loopbackClient = &http.Client{
	Transport: &http.Transport{Proxy: nil},
	Timeout:   10 * time.Second,
}

// freePort returns a loopback TCP port that was free a moment ago. Another
// process may take it before troupe listens; startHTTPServer retries then.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// newToken returns a fresh random bearer token.
// forEachAuth runs body once against a troupe serving HTTP without
// authentication and once against one requiring a bearer token (token is
// "" in the first run), each with a fresh fixture.
func forEachAuth(t *testing.T, body func(t *testing.T, fx fixture, srv *httpServer, token string)) {
	for _, tc := range []struct {
		name  string
		token bool
	}{{"no auth", false}, {"bearer token", true}} {
		t.Run(tc.name, func(t *testing.T) {
			fx := newFixture(t)
			token := ""
			if tc.token {
				token = newToken(t)
			}
			body(t, fx, startHTTPServer(t, fx.dir, token), token)
		})
	}
}

func newToken(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}

// withoutVar returns env without the variable name.
func withoutVar(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}
