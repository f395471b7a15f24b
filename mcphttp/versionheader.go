package mcphttp

import (
	"slices"
	"strconv"
	"strings"

	"troupe/protocol"
)

// maxQuotedVersion bounds how much of a refused MCP-Protocol-Version value
// a refusal quotes back.
const maxQuotedVersion = 64

// versionHeaderRefusal judges the MCP-Protocol-Version header of a request
// in a session: "" (absent) and any handshake revision troupe speaks are
// accepted, whatever the session negotiated, as the reference SDKs do (the
// official conformance suite sends one revision on every stream, whatever
// was negotiated); the header never changes the session's revision.
// Anything else gets the text of a 400 refusal that quotes the value (cut)
// and lists the revisions a session speaks; the stateless revision, which
// has no sessions, is told so. It returns "" when the header is acceptable.
func versionHeaderRefusal(v string) string {
	sessions := protocol.SupportedVersions()
	if v == "" || slices.Contains(sessions, protocol.Version(v)) {
		return ""
	}
	names := make([]string, 0, len(sessions))
	for _, s := range sessions {
		names = append(names, string(s))
	}
	list := "sessions speak " + strings.Join(names, ", ")
	if protocol.Version(v).Supported() {
		return "MCP-Protocol-Version " + strconv.Quote(v) + " has no sessions: send its requests without Mcp-Session-Id (" + list + ")"
	}
	shown := v
	if len(shown) > maxQuotedVersion {
		shown = shown[:maxQuotedVersion] + "…"
	}
	return "MCP-Protocol-Version " + strconv.Quote(shown) + " is not a protocol revision troupe supports (" + list + ")"
}
