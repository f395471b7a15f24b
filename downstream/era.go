package downstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"troupe/protocol"
)

// EraChoice is how a Client picks the era of its server (Config.Era).
type EraChoice string

// The choices of Config.Era, as the configuration spells them.
const (
	EraAuto     EraChoice = ""       // probe, fall back to initialize
	ForceLegacy EraChoice = "legacy" // initialize, no probe
	ForceModern EraChoice = "modern" // 2026-07-28 or nothing
)

// probeTimeout bounds the server/discover probe on stdio: a legacy server
// that does not answer an unknown method before initialize is legacy.
const probeTimeout = 5 * time.Second

// modernVersion is the stateless revision troupe speaks as a client.
const modernVersion = protocol.V20260728

// errLegacy says the probe found a legacy server: fall back to initialize.
var errLegacy = errors.New("the server does not speak a stateless revision")

// discover probes the server's era, as the transports' backward
// compatibility sections describe for a dual-era client: server/discover
// with troupe's modern _meta. A DiscoverResult that lists 2026-07-28 makes
// the server modern; a modern error (-32022, -32020, -32021) names a
// modern server troupe cannot use (no fall back, as the spec says); any
// other error, or silence within probeTimeout on stdio, makes it legacy
// (errLegacy). Transport failures are returned as they are.
func (c *Client) discover(ctx context.Context) error {
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	c.era = protocol.EraStateless // the probe itself carries the modern _meta and headers
	raw, err := c.request(pctx, protocol.MethodServerDiscover, nil, nil)
	c.era = protocol.EraHandshake
	var rpc *RPCError
	switch {
	case err == nil:
	case errors.As(err, &rpc) && isModernError(rpc.Code):
		return fmt.Errorf("the server speaks only stateless revisions troupe does not (%s: %s)", rpc.Message, rpc.Data)
	case errors.Is(err, ErrClosed) || ctx.Err() != nil:
		return err // the server is gone, or the caller's time is up
	default:
		// Any other error, or no answer within probeTimeout: a legacy
		// server (the spec: never key the fallback to one error code).
		return errLegacy
	}
	var res struct {
		SupportedVersions []protocol.Version          `json:"supportedVersions"`
		Capabilities      protocol.ServerCapabilities `json:"capabilities"`
		Meta              map[string]json.RawMessage  `json:"_meta"`
	}
	if json.Unmarshal(raw, &res) != nil || res.SupportedVersions == nil {
		return errLegacy // not a DiscoverResult
	}
	if !slices.Contains(res.SupportedVersions, modernVersion) {
		if slices.ContainsFunc(res.SupportedVersions, protocol.Version.HasHandshake) {
			return errLegacy // a dual-era server whose modern revisions are not ours
		}
		return fmt.Errorf("the server supports %v; troupe supports %v", res.SupportedVersions, protocol.AllVersions())
	}
	c.era, c.version = protocol.EraStateless, modernVersion
	c.toolsChange = res.Capabilities.Tools != nil && res.Capabilities.Tools.ListChanged
	c.promptsChange = res.Capabilities.Prompts != nil && res.Capabilities.Prompts.ListChanged
	c.resourcesChange = res.Capabilities.Resources != nil && res.Capabilities.Resources.ListChanged
	c.resourcesSubscribe = res.Capabilities.Resources != nil && res.Capabilities.Resources.Subscribe
	if info, ok := res.Meta[protocol.MetaServerInfo]; ok {
		_ = json.Unmarshal(info, &c.info)
	}
	return nil
}

// isModernError reports whether code is one of the JSON-RPC errors only a
// stateless-era server sends.
func isModernError(code int64) bool {
	switch code {
	case protocol.CodeUnsupportedVersion, protocol.CodeHeaderMismatch, protocol.CodeMissingCapability:
		return true
	}
	return false
}

// errNotModern is what the HTTP transport reports when the probe got a
// 4xx without a modern JSON-RPC error in its body: a legacy server.
var errNotModern = errors.New("not a stateless-era answer")

// modernMeta is the _meta every request to a modern server carries:
// troupe's protocol version, identity and capabilities.
func (c *Client) modernMeta() map[string]json.RawMessage {
	info, _ := json.Marshal(c.clientInfo)
	v, _ := json.Marshal(modernVersion)
	return map[string]json.RawMessage{
		protocol.MetaProtocolVersion:    v,
		protocol.MetaClientInfo:         info,
		protocol.MetaClientCapabilities: c.declaredCapabilities(),
	}
}

// modernParams adds troupe's modern _meta members to params (a JSON object
// or nil), over any the params had.
func (c *Client) modernParams(params json.RawMessage) json.RawMessage {
	obj := map[string]json.RawMessage{}
	if len(params) > 0 && string(params) != "null" {
		if err := json.Unmarshal(params, &obj); err != nil {
			return params // not an object: the server will say so
		}
	}
	meta := map[string]json.RawMessage{}
	if raw, ok := obj["_meta"]; ok {
		_ = json.Unmarshal(raw, &meta)
	}
	maps.Copy(meta, c.modernMeta())
	obj["_meta"], _ = json.Marshal(meta)
	out, err := json.Marshal(obj)
	if err != nil {
		return params
	}
	return out
}

// hopMeta are the _meta members of the calling client's request that
// describe its own hop to troupe, never troupe's hop downstream: they are
// not forwarded (troupe sends its own to a modern server).
var hopMeta = []string{protocol.MetaProtocolVersion, protocol.MetaClientInfo, protocol.MetaClientCapabilities}

// Era is the kind of revision the server speaks, found when the client
// connected.
func (c *Client) Era() protocol.Era { return c.era }

// listen keeps a subscriptions/listen request open for list changes,
// which a modern server sends on it in place of the legacy GET stream,
// and for the resources troupe subscribed to (resourceSubscriptions:
// Subscribe and Unsubscribe change the set, and the request is opened
// anew with it); its notifications reach the Handlers through the
// transport like any other. A subscription the server ends, or that
// fails, is opened again after a pause, until the connection ends.
func (c *Client) listen() {
	delay := defaultRetry
	for c.life.Err() == nil {
		params, gen, wanted := c.listenParams()
		if !wanted { // nothing to listen for until a Subscribe
			select {
			case <-c.relisten:
				continue
			case <-c.life.Done():
				return
			}
		}
		opened := time.Now()
		ctx, cancel := context.WithCancel(c.life)
		poked := make(chan bool, 1)
		go func() { // ends with ctx, cancelled below
			for {
				select {
				case <-c.relisten:
					if !c.watchChangedSince(gen) {
						continue // a change the request already carries (poked before the set was read)
					}
					poked <- true
					cancel()
				case <-ctx.Done():
					poked <- false
				}
				return
			}
		}()
		_, err := c.request(ctx, protocol.MethodSubscriptionsListen, params, nil)
		cancel()
		if <-poked {
			delay = defaultRetry
			continue // the set changed: open it anew at once
		}
		if c.life.Err() != nil {
			return
		}
		if err != nil {
			c.log.Debug("upstream: subscriptions/listen ended", "err", err)
		}
		if time.Since(opened) > maxRetry {
			delay = defaultRetry // it was up for a while: not a failing loop
		}
		if !sleep(c.life, delay) {
			return
		}
		delay = min(2*delay, maxRetry)
	}
}

// listenParams are the params of the listen request, the generation of
// the subscribed set they carry, and whether there is anything to ask for.
func (c *Client) listenParams() (json.RawMessage, uint64, bool) {
	n := map[string]any{
		"toolsListChanged":     c.toolsChange && c.h.ToolsChanged != nil,
		"promptsListChanged":   c.promptsChange && c.h.PromptsChanged != nil,
		"resourcesListChanged": c.resourcesChange && c.h.ResourcesChanged != nil}
	wanted := n["toolsListChanged"] == true || n["promptsListChanged"] == true || n["resourcesListChanged"] == true
	c.watchMu.Lock()
	uris := slices.Sorted(maps.Keys(c.watched))
	gen := c.watchGen
	c.watchMu.Unlock()
	if len(uris) > 0 {
		n["resourceSubscriptions"] = uris
		wanted = true
	}
	params, _ := json.Marshal(map[string]any{"notifications": n})
	return params, gen, wanted
}

// watchChangedSince reports whether the subscribed set changed after
// generation gen was read.
func (c *Client) watchChangedSince(gen uint64) bool {
	c.watchMu.Lock()
	defer c.watchMu.Unlock()
	return c.watchGen != gen
}

// watch adds uri to (or takes it from) the URIs the listen request asks
// for, and has the request opened anew when that changed the set.
func (c *Client) watch(uri string, on bool) error {
	if !c.resourcesSubscribe || c.h.ResourceUpdated == nil {
		return &RPCError{Code: protocol.CodeMethodNotFound, Message: "the server offers no resource subscriptions"}
	}
	c.watchMu.Lock()
	changed := c.watched[uri] != on
	if on && changed && len(c.watched) >= maxWatched {
		c.watchMu.Unlock()
		return &RPCError{Code: protocol.CodeInvalidParams, Message: fmt.Sprintf("too many resource subscriptions at one server (limit %d)", maxWatched)}
	}
	if on {
		c.watched[uri] = true
	} else {
		delete(c.watched, uri)
	}
	if changed {
		c.watchGen++
	}
	c.watchMu.Unlock()
	if changed {
		select {
		case c.relisten <- struct{}{}:
		default: // one is pending already: it reads the set anew
		}
	}
	return nil
}

// maxWatched bounds the URIs one listen request carries.
const maxWatched = 10000
