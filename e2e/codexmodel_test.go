package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// scriptedModel stands in for the OpenAI Responses API so that the real
// Codex CLI can run offline: Codex POSTs /v1/responses and reads an SSE
// stream of response.created, response.output_item.done and
// response.completed (see ../shared/notes/codex-client.md). What the model
// "says" is decided by next, from the request Codex sent.
type scriptedModel struct {
	srv  *httptest.Server
	next func(req modelRequest) modelItem

	mu       sync.Mutex
	requests []modelRequest
}

// modelRequest is the part of a Responses API request the tests read.
type modelRequest struct {
	Tools []modelTool      `json:"tools"`
	Input []map[string]any `json:"input"`
	Raw   json.RawMessage  `json:"-"`
}

// modelTool is a tool Codex offers the model; MCP servers arrive as
// namespaces ("mcp__<server>") holding function tools.
type modelTool struct {
	Type  string      `json:"type"`
	Name  string      `json:"name"`
	Tools []modelTool `json:"tools"`
}

// modelItem is one output item: a function call or a final message.
type modelItem map[string]any

// functionCall asks Codex to call tool name in namespace ns ("" for none).
func functionCall(callID, ns, name string, args any) modelItem {
	b, _ := json.Marshal(args)
	item := modelItem{"type": "function_call", "call_id": callID, "name": name, "arguments": string(b)}
	if ns != "" {
		item["namespace"] = ns
	}
	return item
}

// message ends the turn with text.
func message(text string) modelItem {
	return modelItem{"type": "message", "role": "assistant", "id": "msg_final",
		"content": []any{map[string]any{"type": "output_text", "text": text}}}
}

func newScriptedModel(t *testing.T, next func(modelRequest) modelItem) *scriptedModel {
	m := &scriptedModel{next: next}
	m.srv = httptest.NewServer(http.HandlerFunc(m.serve)) // 127.0.0.1 only
	t.Cleanup(m.srv.Close)
	return m
}

// baseURL is what Codex's model_providers.<name>.base_url must be.
func (m *scriptedModel) baseURL() string { return m.srv.URL + "/v1" }

func (m *scriptedModel) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || r.URL.Path != "/v1/responses" {
		http.Error(w, "not a Responses API request", http.StatusNotFound)
		return
	}
	var req modelRequest
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	req.Raw = body
	m.mu.Lock()
	m.requests = append(m.requests, req)
	n := len(m.requests)
	m.mu.Unlock()

	item := m.next(req)
	w.Header().Set("Content-Type", "text/event-stream")
	id := fmt.Sprintf("resp_%d", n)
	for _, ev := range []map[string]any{
		{"type": "response.created", "response": map[string]any{"id": id}},
		{"type": "response.output_item.done", "item": item},
		{"type": "response.completed", "response": map[string]any{"id": id,
			"usage": map[string]any{"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}},
	} {
		b, _ := json.Marshal(ev)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", ev["type"], b)
	}
}

// namespace returns the tools Codex offered under ns in req, if any.
func (req modelRequest) namespace(ns string) ([]string, bool) {
	for _, t := range req.Tools {
		if t.Name == ns {
			var names []string
			for _, f := range t.Tools {
				names = append(names, f.Name)
			}
			return names, true
		}
	}
	return nil, false
}

// outputs maps call ids to the function_call_output Codex sent back.
func (req modelRequest) outputs() map[string]string {
	out := map[string]string{}
	for _, it := range req.Input {
		if it["type"] == "function_call_output" {
			id, _ := it["call_id"].(string)
			b, _ := json.Marshal(it["output"])
			out[id] = string(b)
		}
	}
	return out
}
