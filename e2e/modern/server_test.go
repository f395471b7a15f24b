package modern

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// tokenEnv carries the bearer token to troupe (--bearer-token-env).
const tokenEnv = "TROUPE_TOKEN"

const (
	// httpStartTimeout bounds one start of the server, until /healthz
	// answers (a -race build starts slower).
	httpStartTimeout = 30 * time.Second
	// stopTimeout is how long troupe may take to exit once asked to.
	stopTimeout = 15 * time.Second
	// callTimeout bounds every client operation of a test.
	callTimeout = 30 * time.Second
)

// target says how a client reaches troupe: a fresh `troupe serve` subprocess
// per connection over stdio, or one `troupe serve --http` for the test.
type target struct {
	name string // "stdio" or "http"
	dir  string // the workspace

	http  *httpServer // nil over stdio
	log   *lockedBuffer
	extra []string // more arguments of troupe serve (--config)
}

// stdioArgs is the command line of a stdio troupe on the target's workspace.
func (tg *target) stdioArgs() []string {
	return append([]string{"serve", "--workspace", tg.dir, "--log-level", "debug"}, tg.extra...)
}

// forEachTransport runs body once over stdio and once over streamable HTTP
// (with a bearer token), each with a fresh workspace.
func forEachTransport(t *testing.T, body func(t *testing.T, fx fixture, tg *target)) {
	forEachTransportWith(t, nil, body)
}

// forEachTransportWith is forEachTransport with more arguments for troupe
// serve.
func forEachTransportWith(t *testing.T, extra []string, body func(t *testing.T, fx fixture, tg *target)) {
	for _, name := range []string{"stdio", "http"} {
		t.Run(name, func(t *testing.T) {
			fx := newFixture(t)
			tg := &target{name: name, dir: fx.dir, log: &lockedBuffer{}, extra: extra}
			if name == "http" {
				tg.http = startHTTPServer(t, fx.dir, extra...)
				tg.log = tg.http.log
			} else {
				troupeBinary(t)
				t.Cleanup(func() {
					if t.Failed() {
						t.Logf("troupe's log:\n%s", tg.log)
					}
					if strings.Contains(tg.log.String(), "WARNING: DATA RACE") {
						t.Errorf("the server reported a data race")
					}
				})
			}
			body(t, fx, tg)
		})
	}
}

// lockedBuffer is a log several goroutines write and the test reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (w *lockedBuffer) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (w *lockedBuffer) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// httpServer is the real troupe binary serving streamable HTTP on a free
// loopback port, requiring a bearer token. Cleanup stops it with SIGTERM and
// requires exit status 0.
type httpServer struct {
	base  string // http://127.0.0.1:PORT
	url   string // the MCP endpoint, base + "/mcp"
	token string

	cmd    *exec.Cmd
	log    *lockedBuffer
	exited chan struct{} // closed once cmd.Wait has returned
}

// errPortTaken is a start that lost its port to another process between
// freePort and troupe's own listen.
var errPortTaken = errors.New("the port was taken")

// startHTTPServer runs `troupe serve --http` on workspace with a fresh token.
// troupe takes a concrete address, so the port is one that was free a moment
// ago; a start that loses it to another process is retried.
func startHTTPServer(t *testing.T, workspace string, extra ...string) *httpServer {
	t.Helper()
	bin := troupeBinary(t)
	token := newToken(t)
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
		log: &lockedBuffer{}, exited: make(chan struct{})}
	s.cmd = exec.Command(bin, append([]string{"serve", "--workspace", workspace, "--http", addr, "--log-level", "debug",
		"--bearer-token-env", tokenEnv}, extra...)...)
	s.cmd.Env = serverEnv(tokenEnv + "=" + token)
	s.cmd.Stdout, s.cmd.Stderr = s.log, s.log
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
	resp, err := (&http.Client{Transport: &http.Transport{Proxy: nil}}).Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == http.StatusOK && strings.TrimSpace(string(body)) == "ok"
}

// stop sends SIGTERM and requires troupe to exit 0 within stopTimeout.
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
		case <-time.After(stopTimeout):
			_ = s.cmd.Process.Kill()
			<-s.exited
			t.Errorf("troupe did not exit within %v of SIGTERM", stopTimeout)
		}
	}
	if strings.Contains(s.log.String(), "WARNING: DATA RACE") {
		t.Errorf("the server reported a data race")
	}
	if t.Failed() {
		t.Logf("troupe's log (%s):\n%s", s.base, s.log)
	}
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// newToken returns a fresh random bearer token.
func newToken(t *testing.T) string {
	t.Helper()
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b[:])
}
