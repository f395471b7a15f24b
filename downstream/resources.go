package downstream

import (
	"context"
	"encoding/json"
	"fmt"

	"troupe/protocol"
)

// The resources a server offers, asked on behalf of troupe's clients
// (app's gateway tools); results as the server sent them (see prompts.go).

// ListResources asks for one page of the server's resources: the first
// when cursor is "".
func (c *Client) ListResources(ctx context.Context, cursor string) (Page, error) {
	return c.listPage(ctx, "resources/list", "resources", cursor)
}

// ListResourceTemplates asks for one page of the server's resource
// templates: the first when cursor is "".
func (c *Client) ListResourceTemplates(ctx context.Context, cursor string) (Page, error) {
	return c.listPage(ctx, "resources/templates/list", "resourceTemplates", cursor)
}

// ReadResource reads uri and returns the ReadResourceResult as the server
// sent it (binary contents stay the server's base64, byte for byte).
func (c *Client) ReadResource(ctx context.Context, uri string) (json.RawMessage, error) {
	r, err := c.ReadResourceCached(ctx, uri)
	return r.Result, err
}

// Read is a resources/read result as the server sent it, less a 2026-07-28
// server's hop members, and that server's cache hint for it.
type Read struct {
	Result json.RawMessage
	// TTLMs is nil when the server gave no cache hint (a session-based
	// server never does).
	TTLMs   *int64
	Private bool
}

// ReadResourceCached is ReadResource with the server's cache hint.
func (c *Client) ReadResourceCached(ctx context.Context, uri string) (Read, error) {
	params, err := json.Marshal(map[string]string{"uri": uri})
	if err != nil {
		return Read{}, fmt.Errorf("upstream %q: resources/read: %w", c.name, err)
	}
	raw, err := c.request(ctx, "resources/read", params, nil)
	if err != nil {
		return Read{}, c.wrap(ctx, "resources/read", err)
	}
	r := Read{Result: raw}
	if c.era == protocol.EraStateless {
		r.Result, r.TTLMs, r.Private = hopless(raw)
	}
	return r, nil
}

// ListResources asks the server's current connection (Client.ListResources).
func (d *Server) ListResources(ctx context.Context, cursor string) (Page, error) {
	c, err := d.conn()
	if err != nil {
		return Page{}, err
	}
	return c.ListResources(ctx, cursor)
}

// ListResourceTemplates asks the server's current connection
// (Client.ListResourceTemplates).
func (d *Server) ListResourceTemplates(ctx context.Context, cursor string) (Page, error) {
	c, err := d.conn()
	if err != nil {
		return Page{}, err
	}
	return c.ListResourceTemplates(ctx, cursor)
}

// ReadResource asks the server's current connection (Client.ReadResource).
func (d *Server) ReadResource(ctx context.Context, uri string) (json.RawMessage, error) {
	c, err := d.conn()
	if err != nil {
		return nil, err
	}
	return c.ReadResource(ctx, uri)
}

// ReadResourceCached asks the server's current connection
// (Client.ReadResourceCached).
func (d *Server) ReadResourceCached(ctx context.Context, uri string) (Read, error) {
	c, err := d.conn()
	if err != nil {
		return Read{}, err
	}
	return c.ReadResourceCached(ctx, uri)
}

// Subscribe asks the server for notifications/resources/updated of uri
// (Handlers.ResourceUpdated receives them). A 2026-07-28 server has no
// resources/subscribe: the URI joins the resourceSubscriptions of the
// client's subscriptions/listen request, opened anew in the background.
func (c *Client) Subscribe(ctx context.Context, uri string) error {
	if c.era == protocol.EraStateless {
		return c.watch(uri, true)
	}
	params, _ := json.Marshal(map[string]string{"uri": uri})
	_, err := c.forward(ctx, "resources/subscribe", params)
	return err
}

// Unsubscribe ends a subscription Subscribe made.
func (c *Client) Unsubscribe(ctx context.Context, uri string) error {
	if c.era == protocol.EraStateless {
		return c.watch(uri, false)
	}
	params, _ := json.Marshal(map[string]string{"uri": uri})
	_, err := c.forward(ctx, "resources/unsubscribe", params)
	return err
}

// Subscribe asks the server's current connection (Client.Subscribe).
func (d *Server) Subscribe(ctx context.Context, uri string) error {
	c, err := d.conn()
	if err != nil {
		return err
	}
	return c.Subscribe(ctx, uri)
}

// Unsubscribe asks the server's current connection (Client.Unsubscribe).
func (d *Server) Unsubscribe(ctx context.Context, uri string) error {
	c, err := d.conn()
	if err != nil {
		return err
	}
	return c.Unsubscribe(ctx, uri)
}
