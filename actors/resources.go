package actors

import (
	"encoding/base64"
	"errors"
	"strings"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
	"troupe/spool"
)

// The session serves its calls' spooled output as resources: the
// resource_link blocks of a result point here. Only the session that ran a
// call can read its output, and only while the session lives; over HTTP,
// a 2026-07-28 call's output is its caller's (stateless_store.go): the
// requests made with the same credential read it until it has been unused
// for http.session_idle_timeout.

func (s *session) listResources(ctx actor.Context, req *jsonrpc2.Request) {
	res := protocol.ListResourcesResult{Resources: []protocol.Resource{}}
	if store := s.outputStore(false); store != nil {
		desc := "Output of a tool call in this session."
		if s.storeShared {
			desc = "Output of a tool call made with this credential."
		}
		for _, r := range store.List() {
			size := r.Size
			res.Resources = append(res.Resources, protocol.Resource{URI: r.URI, Name: r.Name,
				Description: desc, MimeType: "text/plain", Size: &size})
		}
	}
	s.reply(req.ID, res)
}

func (s *session) listResourceTemplates(ctx actor.Context, req *jsonrpc2.Request) {
	s.reply(req.ID, protocol.ListResourceTemplatesResult{ResourceTemplates: []protocol.ResourceTemplate{{
		URITemplate: spool.URIPrefix + "{id}/{stream}{?offset,length}",
		Name:        "tool-output",
		Title:       "Tool call output",
		Description: "The whole stdout or stderr of a call in this session, in ranges of at most 4 MiB.",
		MimeType:    "text/plain",
	}}})
}

func (s *session) readResource(ctx actor.Context, req *jsonrpc2.Request) {
	var p protocol.ReadResourceParams
	if !s.decode(req, &p) || !s.nameAgrees(req, p.URI) {
		return
	}
	if p.URI == "" {
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: uri is required")
		return
	}
	store := s.outputStore(false)
	if store == nil {
		s.failNotFound(req.ID, p.URI)
		return
	}
	ch, err := store.Read(p.URI)
	switch {
	case errors.Is(err, spool.ErrNotFound) || errors.Is(err, spool.ErrClosed):
		s.failNotFound(req.ID, p.URI)
		return
	case err != nil:
		s.fail(req.ID, protocol.CodeInvalidParams, "invalid params: "+err.Error())
		return
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
	s.reply(req.ID, protocol.ReadResourceResult{Contents: []protocol.ResourceContents{c}})
}

func (s *session) failNotFound(id jsonrpc2.ID, uri string) {
	msg := "resource not found: " + uri
	output := strings.HasPrefix(uri, spool.URIPrefix)
	if s.current != nil {
		// 2026-07-28 retired -32002 for -32602. Its calls' output lives in
		// the stdio process that ran them, or over HTTP in its caller's
		// store. The text is the same whether the output exists for
		// another caller or not at all.
		if output {
			msg += " (a 2026-07-28 call's output is kept by the stdio process that ran it; over HTTP, " +
				"for requests with the same credential until it has been unused for a while)"
		}
		s.fail(id, protocol.CodeInvalidParams, msg)
		return
	}
	if output {
		msg += " (output is kept only by the session that ran the call, while it lives)"
	}
	s.fail(id, protocol.CodeResourceNotFound, msg)
}
