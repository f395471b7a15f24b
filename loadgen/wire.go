package loadgen

import (
	"bytes"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
)

// The hot path neither builds nor parses JSON with reflection: a call is a
// byte template with the id spliced in, and a reply is scanned only at its
// top level for "id", "method", "error" and "result".

// callTemplate is a tools/call request with a hole for the id.
type callTemplate struct {
	prefix, suffix []byte
}

func newCallTemplate(tool string, args json.RawMessage) (callTemplate, error) {
	name, err := json.Marshal(tool)
	if err != nil {
		return callTemplate{}, err
	}
	if len(args) == 0 {
		args = json.RawMessage(`{}`)
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, args); err != nil {
		return callTemplate{}, errors.New("--args is not valid JSON: " + err.Error())
	}
	if b := compact.Bytes(); b[0] != '{' {
		return callTemplate{}, errors.New("--args must be a JSON object")
	}
	suffix := append([]byte(`,"method":"tools/call","params":{"name":`), name...)
	suffix = append(suffix, `,"arguments":`...)
	suffix = append(suffix, compact.Bytes()...)
	suffix = append(suffix, "}}"...)
	return callTemplate{prefix: []byte(`{"jsonrpc":"2.0","id":`), suffix: suffix}, nil
}

// withMeta is the template with a _meta object (JSON) added to its
// params, for the calls of the stateless revision.
func (t callTemplate) withMeta(meta string) callTemplate {
	suffix := bytes.Clone(t.suffix[:len(t.suffix)-2]) // the closing "}}" of params and the request
	suffix = append(suffix, `,"_meta":`...)
	suffix = append(suffix, meta...)
	suffix = append(suffix, "}}"...)
	return callTemplate{prefix: t.prefix, suffix: suffix}
}

// append appends the request with id to dst.
func (t callTemplate) append(dst []byte, id int64) []byte {
	dst = append(dst, t.prefix...)
	dst = strconv.AppendInt(dst, id, 10)
	return append(dst, t.suffix...)
}

func initializeRequest(id int64, version string) []byte {
	return []byte(`{"jsonrpc":"2.0","id":` + strconv.FormatInt(id, 10) +
		`,"method":"initialize","params":{"protocolVersion":"` + version +
		`","capabilities":{},"clientInfo":{"name":"troupe-bench","version":"1"}}}`)
}

var initializedNotification = []byte(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)

// message is what the scanner learns from one JSON-RPC message.
type message struct {
	id      int64 // valid when hasID
	hasID   bool
	method  string // set for requests and notifications
	rawID   []byte // the id as sent (to answer a server's request)
	kind    string // "" for a successful result, else an error kind (see Report.Errors)
	result  []byte // the raw result, for initialize
	errText string // the JSON-RPC error's message, if any
}

// parseMessage scans one JSON-RPC message. A result counts as a tool
// error when it contains "isError":true at any depth; tool output cannot
// fake that, since text inside JSON strings is escaped.
func parseMessage(b []byte) (message, error) {
	var m message
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return m, errors.New("not a JSON object")
	}
	i++
	for {
		i = skipSpace(b, i)
		if i < len(b) && b[i] == '}' {
			return m, nil
		}
		if i >= len(b) || b[i] != '"' {
			return m, errors.New("malformed object")
		}
		kend, err := skipValue(b, i)
		if err != nil {
			return m, err
		}
		key := b[i+1 : kend-1]
		i = skipSpace(b, kend)
		if i >= len(b) || b[i] != ':' {
			return m, errors.New("malformed object")
		}
		i = skipSpace(b, i+1)
		vend, err := skipValue(b, i)
		if err != nil {
			return m, err
		}
		v := b[i:vend]
		switch string(key) {
		case "id":
			m.rawID = v
			if n, err := strconv.ParseInt(string(bytes.Trim(v, `"`)), 10, 64); err == nil {
				m.id, m.hasID = n, true
			}
		case "method":
			m.method = string(bytes.Trim(v, `"`))
		case "result":
			m.result = v
			if bytes.Contains(v, []byte(`"isError":true`)) || bytes.Contains(v, []byte(`"isError": true`)) {
				m.kind = KindIsError
			}
		case "error":
			var e struct {
				Code    int64  `json:"code"`
				Message string `json:"message"`
			}
			_ = json.Unmarshal(v, &e)
			m.kind = KindJSONRPC + strconv.FormatInt(e.Code, 10)
			if e.Code == codeRateLimited {
				m.kind = KindRateLimited
			}
			m.errText = e.Message
		}
		i = skipSpace(b, vend)
		if i < len(b) && b[i] == ',' {
			i++
		}
	}
}

// maxErrorText bounds one error text kept for the report.
const maxErrorText = 200

// failure is what a failed answer says: the JSON-RPC error's message, or
// the text of a tool result with isError; "" for a success. It parses
// only failed answers, so the hot path of successes stays free of it.
func (m message) failure() string {
	switch {
	case m.kind == "":
		return ""
	case m.errText != "":
		return m.errText
	case m.kind == KindIsError:
		var res struct {
			Content []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			} `json:"content"`
		}
		_ = json.Unmarshal(m.result, &res)
		var parts []string
		for _, c := range res.Content {
			if c.Type == "text" && c.Text != "" {
				parts = append(parts, c.Text)
			}
		}
		return strings.Join(parts, " ")
	}
	return ""
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at b[i].
func skipValue(b []byte, i int) (int, error) {
	if i >= len(b) {
		return 0, errors.New("unexpected end")
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for i < len(b) {
			switch b[i] {
			case '"':
				end, err := skipString(b, i)
				if err != nil {
					return 0, err
				}
				i = end
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1, nil
				}
			}
			i++
		}
		return 0, errors.New("unexpected end")
	default:
		j := i
		for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\r' && b[j] != '\t' {
			j++
		}
		if j == i {
			return 0, errors.New("malformed value")
		}
		return j, nil
	}
}

func skipString(b []byte, i int) (int, error) {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1, nil
		}
	}
	return 0, errors.New("unterminated string")
}
