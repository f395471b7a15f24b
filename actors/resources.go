package actors

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"troupe/actors/transport"
	"troupe/protocol"
	"troupe/spool"
)

// The session serves its calls' spooled output as resources: the
// resource_link blocks of a result point here. Only the session that ran a
// call can read its output, and only while the session lives; over HTTP,
// a 2026-07-28 call's output is its caller's (stateless_store.go): the
// requests made with the same credential read it until it has been unused
// for http.session_idle_timeout.

func listResources(v SessionView, req *transport.Request) (any, error) {
	res := protocol.ListResourcesResult{Resources: []protocol.Resource{}}
	if reg := gatewayFor(v, req.Method); reg != nil && hasCursor(req) {
		return gatewayList(req, reg, nil) // the servers' pages follow troupe's own
	}
	if store, shared := v.Output(req, false); store != nil {
		desc := "Output of a tool call in this session."
		if shared {
			desc = "Output of a tool call made with this credential."
		}
		for _, r := range store.List() {
			size := r.Size
			res.Resources = append(res.Resources, protocol.Resource{URI: r.URI, Name: r.Name,
				Description: desc, MimeType: "text/plain", Size: &size})
		}
	}
	if reg := gatewayFor(v, req.Method); reg != nil {
		return gatewayList(req, reg, res.Resources)
	}
	return res, nil
}

func listResourceTemplates(v SessionView, req *transport.Request) (any, error) {
	own := []protocol.ResourceTemplate{{
		URITemplate: spool.URIPrefix + "{id}/{stream}{?offset,length}",
		Name:        "tool-output",
		Title:       "Tool call output",
		Description: "The whole stdout or stderr of a call in this session, in ranges of at most 4 MiB.",
		MimeType:    "text/plain",
	}}
	if reg := gatewayFor(v, req.Method); reg != nil {
		if hasCursor(req) {
			own = nil // on the first page only
		}
		return gatewayList(req, reg, own)
	}
	return protocol.ListResourceTemplatesResult{ResourceTemplates: own}, nil
}

func readResource(v SessionView, req *transport.Request) (any, error) {
	p := req.Params.(*readResourceParams)
	if err := nameAgrees(req, p.URI); err != nil {
		return nil, err
	}
	if p.URI == "" {
		return nil, invalidParams("uri is required")
	}
	if reg := gatewayFor(v, req.Method); reg != nil && !strings.HasPrefix(p.URI, spool.URIPrefix) {
		args, _ := json.Marshal(map[string]any{"uri": p.URI, "stateless": req.Era == protocol.EraStateless})
		return &startingCall{tool: GatewayTool(req.Method), args: args, registry: reg, method: true}, nil
	}
	store, _ := v.Output(req, false)
	if store == nil {
		return nil, notFound(req, p.URI)
	}
	ch, err := store.Read(p.URI)
	switch {
	case errors.Is(err, spool.ErrNotFound) || errors.Is(err, spool.ErrClosed):
		return nil, notFound(req, p.URI)
	case err != nil:
		return nil, invalidParams(err.Error())
	}
	c := protocol.ResourceContents{URI: p.URI, MimeType: "text/plain",
		Meta: map[string]any{protocol.MetaPrefix + "range": map[string]int64{
			"offset": ch.Offset, "length": int64(len(ch.Data)), "total": ch.Total, "next": ch.Next}}}
	if ch.Text {
		text := string(ch.Data)
		c.Text = &text
	} else {
		c.MimeType, c.Blob = "application/octet-stream", base64.StdEncoding.EncodeToString(ch.Data)
	}
	return protocol.ReadResourceResult{Contents: []protocol.ResourceContents{c}}, nil
}

// notFound is the answer to a resources/read of what the request cannot
// read: -32002 in the handshake era, -32602 in the stateless era.
func notFound(req *transport.Request, uri string) error {
	msg := "resource not found: " + uri
	output := strings.HasPrefix(uri, spool.URIPrefix)
	if req.Era == protocol.EraStateless {
		// 2026-07-28 retired -32002 for -32602. Its calls' output lives in
		// the stdio process that ran them, or over HTTP in its caller's
		// store. The text is the same whether the output exists for
		// another caller or not at all.
		if output {
			msg += " (a 2026-07-28 call's output is kept by the stdio process that ran it; over HTTP, " +
				"for requests with the same credential until it has been unused for a while)"
		}
		return &Refusal{Code: protocol.CodeInvalidParams, Message: msg}
	}
	if output {
		msg += " (output is kept only by the session that ran the call, while it lives)"
	}
	return &Refusal{Code: protocol.CodeResourceNotFound, Message: msg}
}
