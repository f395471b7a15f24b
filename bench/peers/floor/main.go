// Command floor is the physical reference of the side-by-side benchmark: a
// hand-written MCP server with no library, serving one tool, echo
// ({"text": string} → one text block). Over stdio it reads newline-delimited
// JSON-RPC and writes answers through one buffer, flushed when no more input
// is waiting. With --http ADDR it serves POST /mcp with JSON answers and an
// Mcp-Session-Id per initialize; with --stateless as well it keeps no
// sessions and serves every POST on its own, as the 2026-07-28 revision
// does (checking none of that revision's _meta or headers: a floor, not a
// server). It implements just what a benchmark client needs: initialize,
// server/discover, notifications/*, ping, tools/list and tools/call.
package main

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
)

type request struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params struct {
		ProtocolVersion string `json:"protocolVersion"`
		Name            string `json:"name"`
		Arguments       struct {
			Text *string `json:"text"`
		} `json:"arguments"`
	} `json:"params"`
}

var versions = map[string]bool{"2024-11-05": true, "2025-03-26": true, "2025-06-18": true, "2025-11-25": true}

const discover = `{"resultType":"complete","supportedVersions":["2026-07-28","2025-11-25","2025-06-18","2025-03-26","2024-11-05"],` +
	`"capabilities":{"tools":{}},"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"floor","version":"1.0.0"}}}`

const toolsList = `{"tools":[{"name":"echo","description":"Echo the text back.","inputSchema":{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}}]}`

// handle appends the answer to line to out; a notification has none. init
// reports an initialize request.
func handle(out, line []byte) (_ []byte, init bool) {
	var req request
	if err := json.Unmarshal(line, &req); err != nil {
		return append(out, `{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"parse error"}}`+"\n"...), false
	}
	if len(req.ID) == 0 || string(req.ID) == "null" {
		return out, false // a notification
	}
	out = append(out, `{"jsonrpc":"2.0","id":`...)
	out = append(out, req.ID...)
	switch req.Method {
	case "initialize":
		v := req.Params.ProtocolVersion
		if !versions[v] {
			v = "2025-06-18"
		}
		out = append(out, `,"result":{"protocolVersion":"`+v+`","capabilities":{"tools":{}},"serverInfo":{"name":"floor","version":"1.0.0"}}}`+"\n"...)
		return out, true
	case "ping":
		out = append(out, `,"result":{}}`+"\n"...)
	case "server/discover":
		out = append(out, `,"result":`+discover+"}\n"...)
	case "tools/list":
		out = append(out, `,"result":`+toolsList+"}\n"...)
	case "tools/call":
		if req.Params.Name != "echo" || req.Params.Arguments.Text == nil {
			out = append(out, `,"error":{"code":-32602,"message":"unknown tool or missing text"}}`+"\n"...)
			break
		}
		text, _ := json.Marshal(*req.Params.Arguments.Text)
		out = append(out, `,"result":{"content":[{"type":"text","text":`...)
		out = append(out, text...)
		out = append(out, "}]}}\n"...)
	default:
		out = append(out, `,"error":{"code":-32601,"message":"method not found"}}`+"\n"...)
	}
	return out, false
}

func serveStdio() error {
	r := bufio.NewReaderSize(os.Stdin, 64<<10)
	w := bufio.NewWriterSize(os.Stdout, 64<<10)
	var out []byte
	for {
		line, err := r.ReadSlice('\n')
		if err == bufio.ErrBufferFull {
			// A long line: gather it whole.
			long := append([]byte(nil), line...)
			for err == bufio.ErrBufferFull {
				line, err = r.ReadSlice('\n')
				long = append(long, line...)
			}
			line = long
		}
		if len(line) > 1 {
			out, _ = handle(out[:0], line)
			if _, werr := w.Write(out); werr != nil {
				return werr
			}
		}
		if err != nil {
			w.Flush()
			if err == io.EOF {
				return nil
			}
			return err
		}
		if r.Buffered() == 0 {
			if err := w.Flush(); err != nil {
				return err
			}
		}
	}
}

// session is what the server keeps per HTTP session.
type session struct{}

type httpServer struct {
	stateless bool // serve every POST on its own: no initialize, no session id
	mu        sync.Mutex
	sessions  map[string]*session
}

func (s *httpServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/mcp" {
		http.NotFound(w, r)
		return
	}
	id := r.Header.Get("Mcp-Session-Id")
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		s.mu.Lock()
		_, ok := s.sessions[id]
		delete(s.sessions, id)
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
		}
		return
	default:
		w.Header().Set("Allow", "POST, DELETE")
		w.WriteHeader(http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 4<<20))
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	if s.stateless {
		out, _ := handle(make([]byte, 0, 256), body)
		if len(out) == 0 {
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write(out)
		return
	}
	if id != "" {
		s.mu.Lock()
		_, ok := s.sessions[id]
		s.mu.Unlock()
		if !ok {
			http.NotFound(w, r)
			return
		}
	}
	out, init := handle(make([]byte, 0, 256), body)
	if len(out) == 0 {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	if init {
		var b [16]byte
		rand.Read(b[:])
		id = hex.EncodeToString(b[:])
		s.mu.Lock()
		s.sessions[id] = &session{}
		s.mu.Unlock()
		w.Header().Set("Mcp-Session-Id", id)
	} else if id == "" {
		http.Error(w, "Mcp-Session-Id required", http.StatusBadRequest)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Write(out)
}

func main() {
	addr := flag.String("http", "", "serve streamable HTTP at /mcp on this address instead of stdio")
	stateless := flag.Bool("stateless", false, "with --http: keep no sessions (each request stands alone)")
	flag.Parse()
	var err error
	if *addr != "" {
		err = http.ListenAndServe(*addr, &httpServer{stateless: *stateless, sessions: map[string]*session{}})
	} else {
		err = serveStdio()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "floor:", err)
		os.Exit(1)
	}
}
