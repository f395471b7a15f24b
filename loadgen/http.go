package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strings"
	"time"
)

// httpSession is one streamable-HTTP MCP session: every call is a POST
// carrying its Mcp-Session-Id, answered as application/json or as an SSE
// stream whose event with our id ends the call.
type httpSession struct {
	client *http.Client
	url    string
	token  string
	id     string // Mcp-Session-Id; empty when the server is stateless
	// via, when set, is where the session's calls are POSTed instead of
	// url (Options.RouteVia): another node of the cluster that owns it,
	// which must forward them. initialize and DELETE still go to url.
	via     string
	version string // negotiated protocol version
	// method and name, when set, are sent as Mcp-Method and Mcp-Name:
	// the stateless revision's calls mirror their method and tool there.
	method, name string
}

func newHTTPClient(conns int) *http.Client {
	tr := &http.Transport{
		Proxy:               nil, // a load test of a local server never goes through a proxy
		MaxIdleConns:        conns * 2,
		MaxIdleConnsPerHost: conns * 2,
		DisableCompression:  true,
		IdleConnTimeout:     30 * time.Second,
	}
	return &http.Client{Transport: tr}
}

func (h *httpSession) post(ctx context.Context, body []byte) (*http.Response, error) {
	url := h.url
	if h.via != "" {
		url = h.via
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if h.id != "" {
		req.Header.Set("Mcp-Session-Id", h.id)
	}
	if h.version != "" {
		req.Header.Set("Mcp-Protocol-Version", h.version)
	}
	if h.method != "" {
		req.Header.Set("Mcp-Method", h.method)
	}
	if h.name != "" {
		req.Header.Set("Mcp-Name", h.name)
	}
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	return h.client.Do(req)
}

// openHTTPSession initializes a session.
func openHTTPSession(ctx context.Context, client *http.Client, url, token, version string, timeout time.Duration) (*httpSession, error) {
	h := &httpSession{client: client, url: url, token: token}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	resp, err := h.post(ctx, initializeRequest(0, version))
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	m, err := readAnswer(resp, 0)
	if err != nil {
		return nil, fmt.Errorf("initialize: %w", err)
	}
	if m.kind != "" {
		return nil, fmt.Errorf("initialize failed: %s %s", m.kind, m.errText)
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	_ = json.Unmarshal(m.result, &res)
	h.id, h.version = resp.Header.Get("Mcp-Session-Id"), res.ProtocolVersion
	resp, err = h.post(ctx, initializedNotification)
	if err != nil {
		return nil, fmt.Errorf("notifications/initialized: %w", err)
	}
	drain(resp)
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("notifications/initialized: HTTP %d", resp.StatusCode)
	}
	return h, nil
}

// close ends the session with DELETE (servers may refuse it; that is fine).
func (h *httpSession) close(ctx context.Context) {
	if h.id == "" {
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodDelete, h.url, nil)
	if err != nil {
		return
	}
	req.Header.Set("Mcp-Session-Id", h.id)
	if h.token != "" {
		req.Header.Set("Authorization", "Bearer "+h.token)
	}
	if resp, err := h.client.Do(req); err == nil {
		drain(resp)
	}
}

func (h *httpSession) roundTrip(ctx context.Context, c *caller, id int64, req []byte) (string, string) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	resp, err := h.post(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return KindTimeout, ""
		}
		return KindTransport, err.Error()
	}
	m, err := readAnswer(resp, id)
	if err != nil {
		if ctx.Err() != nil {
			return KindTimeout, ""
		}
		return KindTransport, err.Error()
	}
	return m.kind, m.failure()
}

func drain(resp *http.Response) {
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
}

// readAnswer reads the answer to request id from a POST's response, JSON
// or SSE, and closes the body.
func readAnswer(resp *http.Response, id int64) (message, error) {
	defer drain(resp)
	if resp.StatusCode == http.StatusTooManyRequests {
		// Refused over a limit: the body's JSON-RPC error says which.
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		m, _ := parseMessage(body)
		m.kind = KindRateLimited
		if m.errText == "" {
			m.errText = "HTTP " + resp.Status
		}
		return m, nil
	}
	if resp.StatusCode != http.StatusOK {
		return message{}, &StatusError{Code: resp.StatusCode, Status: resp.Status}
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if mt != "text/event-stream" {
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		if err != nil {
			return message{}, err
		}
		return parseMessage(body)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	var data []byte
	for sc.Scan() {
		line := sc.Bytes()
		switch {
		case len(line) == 0:
			if len(data) > 0 {
				if m, err := parseMessage(data); err == nil && m.hasID && m.method == "" && m.id == id {
					return m, nil
				}
			}
			data = data[:0]
		case bytes.HasPrefix(line, []byte("data:")):
			if len(data) > 0 {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(line[5:], []byte(" "))...)
		}
	}
	if err := sc.Err(); err != nil {
		return message{}, err
	}
	return message{}, errors.New("the SSE stream ended without the answer")
}

// StatusError is an HTTP answer other than 200 to a POST, so a caller can
// tell a refused token (401) from other failures and say what to do.
type StatusError struct {
	Code   int    // the status code
	Status string // as the server sent it, "401 Unauthorized"
}

func (e *StatusError) Error() string { return "HTTP " + e.Status }

// validURL checks an --http address.
func validURL(u string) error {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("%q is not an http:// or https:// URL", u)
	}
	return nil
}

// validURLs checks the --http addresses of a run: each valid, none given
// twice (its share of the load would be counted under one name).
func validURLs(urls []string) error {
	seen := make(map[string]bool, len(urls))
	for _, u := range urls {
		if err := validURL(u); err != nil {
			return err
		}
		if seen[u] {
			return fmt.Errorf("%q is given twice: name each URL once", u)
		}
		seen[u] = true
	}
	return nil
}
