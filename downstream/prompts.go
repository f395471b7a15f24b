package downstream

import (
	"context"
	"encoding/json"
	"fmt"

	"troupe/protocol"
)

// The prompts and completions a server offers, asked on behalf of
// troupe's clients (app's gateway tools). Results come back as the server
// sent them, so a client sees through troupe what it would see directly;
// only the members that describe the stateless hop itself (resultType and
// the cache hint a 2026-07-28 server adds) are taken off, since troupe
// adds its own for its own clients.

// Page is one page of a list the server answered: its entries, each as
// the server sent it, and the cursor of the next page ("" when it was the
// last).
type Page struct {
	Items      []json.RawMessage
	NextCursor string
	// TTLMs and Private are a 2026-07-28 server's cache hint for the page
	// (TTLMs nil when it gave none).
	TTLMs   *int64
	Private bool
}

// ListPrompts asks for one page of the server's prompts: the first when
// cursor is "".
func (c *Client) ListPrompts(ctx context.Context, cursor string) (Page, error) {
	return c.listPage(ctx, "prompts/list", "prompts", cursor)
}

// GetPrompt asks for prompt name with args (a JSON object of strings, or
// nil) and returns the GetPromptResult as the server sent it.
func (c *Client) GetPrompt(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	params, err := json.Marshal(struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments,omitempty"`
	}{name, args})
	if err != nil {
		return nil, fmt.Errorf("upstream %q: prompts/get: %w", c.name, err)
	}
	return c.forward(ctx, "prompts/get", params)
}

// Complete asks completion/complete with params (ref, argument, context,
// as the client sent them but with the server's own names) and returns
// the CompleteResult as the server sent it.
func (c *Client) Complete(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	return c.forward(ctx, "completion/complete", params)
}

// forward sends one request and returns its result without the stateless
// hop's own members.
func (c *Client) forward(ctx context.Context, method string, params json.RawMessage) (json.RawMessage, error) {
	raw, err := c.request(ctx, method, params, nil)
	if err != nil {
		return nil, c.wrap(ctx, method, err)
	}
	if c.era == protocol.EraStateless {
		raw, _, _ = hopless(raw)
	}
	return raw, nil
}

// listPage asks for one page of a list whose entries are under key.
func (c *Client) listPage(ctx context.Context, method, key, cursor string) (Page, error) {
	var params json.RawMessage
	if cursor != "" {
		params, _ = json.Marshal(map[string]string{"cursor": cursor})
	}
	raw, err := c.request(ctx, method, params, nil)
	if err != nil {
		return Page{}, c.wrap(ctx, method, err)
	}
	var p Page
	if c.era == protocol.EraStateless {
		raw, p.TTLMs, p.Private = hopless(raw)
	}
	var page map[string]json.RawMessage
	if err := json.Unmarshal(raw, &page); err != nil {
		return Page{}, fmt.Errorf("upstream %q: %s: the answer is not an object: %w", c.name, method, err)
	}
	if items, ok := page[key]; ok && string(items) != "null" {
		if err := json.Unmarshal(items, &p.Items); err != nil {
			return Page{}, fmt.Errorf("upstream %q: %s: %q is not a list: %w", c.name, method, key, err)
		}
	}
	if next, ok := page["nextCursor"]; ok && string(next) != "null" {
		if err := json.Unmarshal(next, &p.NextCursor); err != nil {
			return Page{}, fmt.Errorf("upstream %q: %s: nextCursor is not a string", c.name, method)
		}
		if p.NextCursor == cursor && cursor != "" {
			return Page{}, fmt.Errorf("upstream %q: %s: the server repeated cursor %q", c.name, method, cursor)
		}
	}
	return p, nil
}

// hopless takes resultType, ttlMs, cacheScope and the server's identity
// in _meta off a 2026-07-28 result, returning the cache hint they gave. A
// result that is not an object is returned as it is.
func hopless(raw json.RawMessage) (json.RawMessage, *int64, bool) {
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil || obj == nil {
		return raw, nil, false
	}
	var ttl *int64
	if t, ok := obj["ttlMs"]; ok {
		var n int64
		if json.Unmarshal(t, &n) == nil {
			ttl = &n
		}
	}
	private := string(obj["cacheScope"]) == `"private"`
	_, a := obj["resultType"]
	_, b := obj["ttlMs"]
	_, d := obj["cacheScope"]
	info := false
	if m, ok := obj["_meta"]; ok {
		var meta map[string]json.RawMessage
		if json.Unmarshal(m, &meta) == nil {
			if _, info = meta[protocol.MetaServerInfo]; info {
				delete(meta, protocol.MetaServerInfo)
				if len(meta) == 0 {
					delete(obj, "_meta")
				} else {
					obj["_meta"], _ = json.Marshal(meta)
				}
			}
		}
	}
	if !a && !b && !d && !info {
		return raw, ttl, private
	}
	delete(obj, "resultType")
	delete(obj, "ttlMs")
	delete(obj, "cacheScope")
	out, err := json.Marshal(obj)
	if err != nil {
		return raw, ttl, private
	}
	return out, ttl, private
}

// conn is the server's current connection, or the error of a request
// made while it has none.
func (d *Server) conn() (*Client, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.client == nil {
		return nil, &notConnected{server: d.name, state: d.state, why: d.err}
	}
	return d.client, nil
}

// ListPrompts asks the server's current connection for one page of its
// prompts (Client.ListPrompts).
func (d *Server) ListPrompts(ctx context.Context, cursor string) (Page, error) {
	c, err := d.conn()
	if err != nil {
		return Page{}, err
	}
	return c.ListPrompts(ctx, cursor)
}

// GetPrompt asks the server's current connection for a prompt
// (Client.GetPrompt).
func (d *Server) GetPrompt(ctx context.Context, name string, args json.RawMessage) (json.RawMessage, error) {
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	return c.GetPrompt(ctx, name, args)
}

// Complete asks the server's current connection for completions
// (Client.Complete).
func (d *Server) Complete(ctx context.Context, params json.RawMessage) (json.RawMessage, error) {
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	return c.Complete(ctx, params)
}
