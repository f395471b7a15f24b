package modern

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

// exchange is one JSON-RPC request a client sent and what came back, as
// bytes on the wire: the clients parse leniently, so the tests look at what
// troupe really wrote.
type exchange struct {
	Method   string
	Request  json.RawMessage
	Response json.RawMessage // nil until (unless) the answer arrives

	// Over HTTP only.
	Status     int
	ReqHeader  http.Header
	RespHeader http.Header
}

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int             `json:"code"`
	Message string          `json:"message"`
	Data    json.RawMessage `json:"data"`
}

// result decodes the exchange's result, or fails with what came instead.
func (ex *exchange) result() (map[string]any, *rpcError) {
	var resp struct {
		Result map[string]any `json:"result"`
		Error  *rpcError      `json:"error"`
	}
	_ = json.Unmarshal(ex.Response, &resp)
	return resp.Result, resp.Error
}

// recorder keeps a client's exchanges, in the order the requests were sent.
// Over HTTP it also holds a header rewrite the test may set, applied to
// tools/call requests only (to play a client or proxy whose headers disagree
// with the body).
type recorder struct {
	mu        sync.Mutex
	exchanges []*exchange
	rewrite   atomic.Pointer[func(http.Header)]
}

// sent records a message the client sends and returns its exchange (nil for
// anything that is not a request).
func (r *recorder) sent(raw []byte) *exchange {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(raw, &msg) != nil || msg.Method == "" || len(msg.ID) == 0 {
		return nil
	}
	ex := &exchange{Method: msg.Method, Request: append(json.RawMessage(nil), raw...)}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.exchanges = append(r.exchanges, ex)
	return ex
}

// received records a message from troupe: a response is filed with the
// latest unanswered request of the same id.
func (r *recorder) received(raw []byte) {
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
	}
	if json.Unmarshal(raw, &msg) != nil || msg.Method != "" || len(msg.ID) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := len(r.exchanges) - 1; i >= 0; i-- {
		ex := r.exchanges[i]
		var req struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(ex.Request, &req)
		if ex.Response == nil && bytes.Equal(req.ID, msg.ID) {
			ex.Response = append(json.RawMessage(nil), raw...)
			return
		}
	}
}

// all returns the exchanges of method, oldest first ("" for every one).
func (r *recorder) all(method string) []*exchange {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []*exchange
	for _, ex := range r.exchanges {
		if method == "" || ex.Method == method {
			c := *ex
			out = append(out, &c)
		}
	}
	return out
}

// last returns the latest exchange of method, or nil.
func (r *recorder) last(method string) *exchange {
	all := r.all(method)
	if len(all) == 0 {
		return nil
	}
	return all[len(all)-1]
}

// recordingTransport is an http.RoundTripper that adds the bearer token,
// applies the recorder's rewrite to tools/call requests, and records every
// POST and its answer (a JSON body, or each event of an SSE stream as it is
// read, so the record is complete before the client sees the response).
type recordingTransport struct {
	rec   *recorder
	token string
	base  http.RoundTripper
}

func (rt *recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+rt.token)
	var ex *exchange
	if req.Body != nil && req.Method == http.MethodPost {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
		ex = rt.rec.sent(body)
		if ex != nil && ex.Method == "tools/call" {
			if fn := rt.rec.rewrite.Load(); fn != nil {
				(*fn)(req.Header)
			}
		}
		if ex != nil {
			rt.rec.mu.Lock()
			ex.ReqHeader = req.Header.Clone()
			rt.rec.mu.Unlock()
		}
	}
	resp, err := rt.base.RoundTrip(req)
	if err != nil || ex == nil {
		return resp, err
	}
	rt.rec.mu.Lock()
	ex.Status, ex.RespHeader = resp.StatusCode, resp.Header.Clone()
	rt.rec.mu.Unlock()
	resp.Body = &teeBody{ReadCloser: resp.Body, rec: rt.rec,
		sse: bytes.HasPrefix([]byte(resp.Header.Get("Content-Type")), []byte("text/event-stream"))}
	return resp, nil
}

// teeBody records the messages of a response body as they are read.
type teeBody struct {
	io.ReadCloser
	rec *recorder
	sse bool
	buf []byte
}

func (b *teeBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.buf = append(b.buf, p[:n]...)
	if b.sse {
		b.events()
	} else if json.Valid(b.buf) {
		b.rec.received(b.buf)
		b.buf = nil
	}
	return n, err
}

// events records each complete SSE event's data.
func (b *teeBody) events() {
	for {
		b.buf = bytes.ReplaceAll(b.buf, []byte("\r\n"), []byte("\n"))
		i := bytes.Index(b.buf, []byte("\n\n"))
		if i < 0 {
			return
		}
		var data []byte
		for _, line := range bytes.Split(b.buf[:i], []byte("\n")) {
			if d, ok := bytes.CutPrefix(line, []byte("data:")); ok {
				data = append(data, bytes.TrimPrefix(d, []byte(" "))...)
			}
		}
		if len(data) > 0 {
			b.rec.received(data)
		}
		b.buf = b.buf[i+2:]
	}
}
