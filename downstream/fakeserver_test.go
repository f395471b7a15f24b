package downstream_test

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"troupe/internal/leakcheck"
)

// serverVar, set in the child's environment, makes the test binary a
// scripted stdio MCP server; its value is the mode (see fakeServer).
const serverVar = "UPSTREAM_TEST_SERVER"

func TestMain(m *testing.M) {
	if mode := os.Getenv(serverVar); mode != "" {
		fakeServer(mode)
		os.Exit(0)
	}
	leakcheck.VerifyTestMain(m)
}

// rawTools are the fake's tools/list pages, written by hand so that the
// test can check they come back byte for byte (member order included).
var rawTools = [][]string{
	{
		`{"name":"alpha","title":"Alpha","inputSchema":{"type":"object","properties":{"q":{"type":"string"}}},"annotations":{"readOnlyHint":true},"_meta":{"x.example/k":[1,2.50]}}`,
		`{"name":"beta","inputSchema":{"type":"object"},"icons":[{"src":"https://x/i.png"}]}`,
	},
	{
		`{"name":"gamma","description":"last page","inputSchema":{"type":"object"}}`,
	},
}

// rawPrompts are the fake's two prompts/list pages (one prompt each).
var rawPrompts = []string{
	`{"name":"greet","arguments":[{"name":"who","required":true}],"_meta":{"x.example/k":1.50}}`,
	`{"name":"bye","title":"Bye"}`,
}

// fake is the state of the scripted server.
type fake struct {
	mode string
	wmu  sync.Mutex

	mu        sync.Mutex
	nextID    int
	pending   map[string]chan json.RawMessage // our requests to the client, by id
	calls     map[string]chan struct{}        // calls in flight, closed on notifications/cancelled
	cancelled []string                        // "id:reason" of each cancellation seen
	init      json.RawMessage                 // the params of initialize
	late      string                          // the answers to the questions of "late"
}

type fakeMsg struct {
	JSONRPC string          `json:"jsonrpc"`
	ID      json.RawMessage `json:"id,omitempty"`
	Method  string          `json:"method,omitempty"`
	Params  json.RawMessage `json:"params,omitempty"`
	Result  json.RawMessage `json:"result,omitempty"`
	Error   json.RawMessage `json:"error,omitempty"`
}

// fakeServer speaks MCP on stdin/stdout. Modes: "normal"; "mute" never
// answers initialize; "old" negotiates 2025-03-26; "alien" answers
// 1999-01-01; "stubborn" ignores SIGTERM and stdin's end.
func fakeServer(mode string) {
	fmt.Fprintln(os.Stderr, "fake server starting")
	if mode == "stubborn" {
		signal.Ignore(syscall.SIGTERM)
	}
	f := &fake{mode: mode, pending: map[string]chan json.RawMessage{}, calls: map[string]chan struct{}{}}
	sc := bufio.NewScanner(os.Stdin)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var m fakeMsg
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			fmt.Fprintln(os.Stderr, "fake: bad line:", err)
			continue
		}
		switch {
		case m.Method == "": // a response to one of our requests
			f.mu.Lock()
			ch := f.pending[string(m.ID)]
			delete(f.pending, string(m.ID))
			f.mu.Unlock()
			if ch != nil {
				if m.Error != nil {
					ch <- json.RawMessage(`{"error":` + string(m.Error) + `}`)
				} else {
					ch <- m.Result
				}
			}
		case m.ID == nil:
			if m.Method == "notifications/cancelled" {
				var p struct {
					RequestID json.RawMessage `json:"requestId"`
					Reason    string          `json:"reason"`
				}
				_ = json.Unmarshal(m.Params, &p)
				f.mu.Lock()
				f.cancelled = append(f.cancelled, string(p.RequestID)+":"+p.Reason)
				if ch := f.calls[string(p.RequestID)]; ch != nil {
					close(ch)
					delete(f.calls, string(p.RequestID))
				}
				f.mu.Unlock()
			}
		default:
			if m.Method == "tools/call" {
				f.mu.Lock()
				f.calls[string(m.ID)] = make(chan struct{})
				f.mu.Unlock()
			}
			go f.handle(m)
		}
	}
	if mode == "stubborn" {
		time.Sleep(time.Minute)
	}
}

func (f *fake) send(v any) {
	if m, ok := v.(fakeMsg); ok {
		m.JSONRPC = "2.0"
		v = m
	}
	b, _ := json.Marshal(v)
	f.wmu.Lock()
	defer f.wmu.Unlock()
	os.Stdout.Write(append(b, '\n'))
}

func (f *fake) reply(id json.RawMessage, result string) {
	f.send(fakeMsg{ID: id, Result: json.RawMessage(result)})
}

func (f *fake) notify(method string, params any) {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	f.send(msg)
}

// ask sends a request to the client and waits for its answer.
func (f *fake) ask(method string, params any) json.RawMessage {
	f.mu.Lock()
	f.nextID++
	id := fmt.Sprintf(`"srv-%d"`, f.nextID)
	ch := make(chan json.RawMessage, 1)
	f.pending[id] = ch
	f.mu.Unlock()
	msg := map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(id), "method": method}
	if params != nil {
		msg["params"] = params
	}
	f.send(msg)
	return <-ch
}

func text(s string) string {
	b, _ := json.Marshal(s)
	return `{"content":[{"type":"text","text":` + string(b) + `}]}`
}

func (f *fake) handle(m fakeMsg) {
	switch m.Method {
	case "initialize":
		f.mu.Lock()
		f.init = m.Params
		f.mu.Unlock()
		version := "2025-11-25"
		switch f.mode {
		case "mute":
			return
		case "old":
			version = "2025-03-26"
		case "alien":
			version = "1999-01-01"
		}
		f.reply(m.ID, `{"protocolVersion":"`+version+`","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"fake","version":"1.0"}}`)
	case "ping":
		f.reply(m.ID, `{}`)
	case "tools/list":
		var p struct {
			Cursor *string `json:"cursor"`
		}
		_ = json.Unmarshal(m.Params, &p)
		switch {
		case p.Cursor == nil:
			f.reply(m.ID, `{"tools":[`+strings.Join(rawTools[0], ",")+`],"nextCursor":"page2"}`)
		case *p.Cursor == "page2":
			f.reply(m.ID, `{"tools":[`+strings.Join(rawTools[1], ",")+`]}`)
		default:
			f.send(fakeMsg{ID: m.ID, Error: json.RawMessage(`{"code":-32602,"message":"bad cursor"}`)})
		}
	case "tools/call":
		f.call(m)
	case "prompts/list":
		if strings.Contains(string(m.Params), `"changed"`) {
			f.notify("notifications/prompts/list_changed", nil)
		}
		if strings.Contains(string(m.Params), `"p2"`) {
			f.reply(m.ID, `{"prompts":[`+rawPrompts[1]+`]}`)
		} else {
			f.reply(m.ID, `{"prompts":[`+rawPrompts[0]+`],"nextCursor":"p2"}`)
		}
	case "resources/list":
		if strings.Contains(string(m.Params), `"changed"`) {
			f.notify("notifications/resources/list_changed", nil)
		}
		if strings.Contains(string(m.Params), `"huge"`) {
			// 100,000 resources in one page: about 6 MB on one line.
			var b strings.Builder
			b.WriteString(`{"resources":[`)
			for i := range 100_000 {
				if i > 0 {
					b.WriteByte(',')
				}
				fmt.Fprintf(&b, `{"uri":"test://r/%06d","name":"resource %06d","mimeType":"text/plain"}`, i, i)
			}
			b.WriteString(`]}`)
			f.reply(m.ID, b.String())
			return
		}
		f.reply(m.ID, `{"resources":[{"uri":"test://a","name":"a"}]}`)
	case "resources/templates/list":
		f.reply(m.ID, `{"resourceTemplates":[{"uriTemplate":"test://t/{x}","name":"t"}]}`)
	case "resources/subscribe":
		var p struct {
			URI string `json:"uri"`
		}
		_ = json.Unmarshal(m.Params, &p)
		f.reply(m.ID, `{}`)
		f.notify("notifications/resources/updated", map[string]string{"uri": p.URI})
	case "resources/unsubscribe":
		f.reply(m.ID, `{}`)
	case "prompts/get", "completion/complete", "resources/read":
		// The params come back, so the test sees what was sent.
		f.reply(m.ID, `{"sent":`+string(m.Params)+`}`)
	default:
		f.send(fakeMsg{ID: m.ID, Error: json.RawMessage(`{"code":-32601,"message":"no such method"}`)})
	}
}

func (f *fake) call(m fakeMsg) {
	var p struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
		Meta      struct {
			ProgressToken json.RawMessage `json:"progressToken"`
		} `json:"_meta"`
	}
	_ = json.Unmarshal(m.Params, &p)
	f.mu.Lock()
	cancelled := f.calls[string(m.ID)]
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.calls, string(m.ID))
		f.mu.Unlock()
	}()
	progress := func(n float64, msg string) {
		f.notify("notifications/progress", map[string]any{"progressToken": p.Meta.ProgressToken, "progress": n, "total": 2, "message": msg})
	}
	switch p.Name {
	case "echo":
		f.reply(m.ID, text(string(p.Arguments)))
	case "env":
		wd, _ := os.Getwd()
		f.reply(m.ID, text(wd+"\n"+strings.Join(os.Environ(), "\n")))
	case "chatty":
		progress(1, "half")
		f.notify("notifications/message", map[string]any{"level": "info", "logger": "fake", "data": map[string]int{"n": 1}})
		answer := f.ask("elicitation/create", map[string]any{"message": "ok?", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}}})
		progress(2, "done")
		f.reply(m.ID, text("elicited "+string(answer)))
	case "slow":
		progress(1, "started")
		select {
		case <-cancelled: // a cancelled request gets no answer
		case <-time.After(30 * time.Second):
			f.reply(m.ID, text("slow finished"))
		}
	case "cancellations":
		f.mu.Lock()
		seen := strings.Join(f.cancelled, "\n")
		f.mu.Unlock()
		f.reply(m.ID, text(seen))
	case "initparams": // what the client declared in initialize
		f.mu.Lock()
		init := f.init
		f.mu.Unlock()
		f.reply(m.ID, text(string(init)))
	case "params": // this call's params, as received
		f.reply(m.ID, text(string(m.Params)))
	case "urlelicit":
		answer := f.ask("elicitation/create", map[string]any{"mode": "url", "message": "sign in",
			"url": "https://example.com/auth?s=1", "elicitationId": "e-1"})
		f.notify("notifications/elicitation/complete", map[string]any{"elicitationId": "e-2"}) // not this call's
		f.notify("notifications/elicitation/complete", map[string]any{"elicitationId": "e-1"})
		f.reply(m.ID, text("elicited "+string(answer)))
	case "sample": // asks the client's model, as server-everything's trigger-sampling-request does
		answer := f.ask("sampling/createMessage", map[string]any{"maxTokens": 10,
			"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "hi"}}}})
		f.reply(m.ID, text("sampled "+string(answer)))
	case "late": // answers, then asks once no call is in flight
		f.reply(m.ID, text("answered"))
		go func() {
			time.Sleep(100 * time.Millisecond)
			e := f.ask("elicitation/create", map[string]any{"message": "too late?", "requestedSchema": map[string]any{"type": "object", "properties": map[string]any{}}})
			s := f.ask("sampling/createMessage", map[string]any{"maxTokens": 10,
				"messages": []any{map[string]any{"role": "user", "content": map[string]any{"type": "text", "text": "too late?"}}}})
			f.mu.Lock()
			f.late = string(e) + "|" + string(s)
			f.mu.Unlock()
		}()
	case "late-answers": // what the client answered to late's questions
		f.mu.Lock()
		late := f.late
		f.mu.Unlock()
		f.reply(m.ID, text(late))
	case "fail":
		f.reply(m.ID, `{"content":[{"type":"text","text":"it broke"}],"isError":true}`)
	case "rpcerr":
		f.send(fakeMsg{ID: m.ID, Error: json.RawMessage(`{"code":-32602,"message":"bad arguments","data":{"field":"q"}}`)})
	case "die":
		progress(1, "dying")
		time.Sleep(50 * time.Millisecond)
		os.Exit(3)
	case "notify":
		f.notify("notifications/tools/list_changed", nil)
		f.reply(m.ID, text("notified"))
	case "pingme":
		a := f.ask("ping", nil)
		b := f.ask("roots/list", nil)
		c := f.ask("foo/bar", map[string]any{})
		f.reply(m.ID, text(string(a)+"|"+string(b)+"|"+string(c)))
	case "badline":
		f.wmu.Lock()
		os.Stdout.Write([]byte("{this is not json\n"))
		f.wmu.Unlock()
		f.reply(m.ID, text("after the bad line"))
	default:
		f.reply(m.ID, `{"content":[{"type":"text","text":"unknown tool"}],"isError":true}`)
	}
}
