package protocol

import "slices"

// Version is an MCP protocol revision, named by its date as on the wire
// ("2025-06-18"). The methods on Version answer "does this revision have
// feature X?", so the rest of troupe never compares date strings: adding a
// revision means adding a row to the table below, not editing call sites.
type Version string

// The revisions troupe speaks. All of them are handshake-based ("legacy" in
// the terms of 2026-07-28): the client sends initialize first and the
// negotiated revision then governs the session.
const (
	V20241105 Version = "2024-11-05"
	V20250326 Version = "2025-03-26"
	V20250618 Version = "2025-06-18"
	V20251125 Version = "2025-11-25"
	// V20260728 is the stateless revision: no initialize, the version and
	// the client's capabilities travel in every request's _meta.
	V20260728 Version = "2026-07-28"
)

// Latest is the revision offered when a client asks for one troupe does not
// speak (the spec's counter-offer rule: answer with the latest supported).
const Latest = V20251125

// features lists what each revision adds. Kept as one table so a new revision
// (including the stateless 2026-07-28, whose dispatch differs) is a new case.
func features(v Version) (featureSet, bool) {
	switch v {
	case V20241105:
		return featureSet{}, true
	case V20250326:
		return featureSet{batches: true, audio: true, toolAnnotations: true, progressMessage: true}, true
	case V20250618:
		return featureSet{audio: true, toolAnnotations: true, progressMessage: true, structured: true,
			titles: true, resourceLinks: true, meta: true, elicitation: true}, true
	case V20251125:
		return featureSet{audio: true, toolAnnotations: true, progressMessage: true, structured: true,
			titles: true, resourceLinks: true, meta: true, icons: true, elicitation: true, elicitModes: true}, true
	case V20260728:
		return featureSet{audio: true, toolAnnotations: true, progressMessage: true, structured: true,
			titles: true, resourceLinks: true, meta: true, icons: true, elicitModes: true, stateless: true}, true
	}
	return featureSet{}, false
}

type featureSet struct {
	batches         bool // JSON-RPC batch arrays accepted (2025-03-26 only)
	audio           bool // audio content blocks
	toolAnnotations bool // Tool.annotations
	progressMessage bool // notifications/progress carries "message"
	structured      bool // Tool.outputSchema and CallToolResult.structuredContent
	titles          bool // Tool.title and Implementation.title
	resourceLinks   bool // resource_link content blocks
	meta            bool // Tool._meta
	icons           bool // icons on tools and Implementation, Implementation.description
	elicitation     bool // elicitation/create exists
	elicitModes     bool // elicitation has modes (form, url) and titled oneOf enums
	// stateless: no initialize; version, capabilities and client info in
	// each request's _meta; server/discover; resultType and cache fields on
	// results; no ping, no logging/setLevel, no server-to-client requests.
	stateless bool
}

// SupportedVersions lists the handshake revisions troupe negotiates in
// initialize, oldest first.
func SupportedVersions() []Version {
	return []Version{V20241105, V20250326, V20250618, V20251125}
}

// AllVersions lists every revision troupe speaks, newest first, as
// server/discover and the unsupported-version error name them.
func AllVersions() []Version {
	return slices.Clone(allVersions[:])
}

// allVersions backs AllVersions and VersionIndex; never written.
var allVersions = [...]Version{V20260728, V20251125, V20250618, V20250326, V20241105}

// VersionIndex is v's position in AllVersions plus one, 0 for a revision
// troupe does not speak: a compact form for values read often and
// concurrently (an atomic integer instead of a pointer per session).
func VersionIndex(v Version) uint32 {
	for i, known := range allVersions {
		if known == v {
			return uint32(i + 1)
		}
	}
	return 0
}

// VersionAt undoes VersionIndex ("" for 0).
func VersionAt(i uint32) Version {
	if i == 0 || int(i) > len(allVersions) {
		return ""
	}
	return allVersions[i-1]
}

// Supported reports whether troupe speaks revision v.
func (v Version) Supported() bool { _, ok := features(v); return ok }

// Negotiate applies the spec's rule: a supported requested revision is echoed,
// anything else is answered with Latest (it is not an error; the client
// decides whether it can live with the counter-offer).
func Negotiate(requested string) Version {
	if v := Version(requested); v.Supported() && v.HasHandshake() {
		return v
	}
	return Latest
}

// IsStateless reports whether v is a revision without initialize, whose
// requests each carry their version and capabilities in _meta.
func (v Version) IsStateless() bool { return v.has().stateless }

// HasHandshake reports whether v is negotiated with initialize (and so
// has sessions, ping and logging/setLevel).
func (v Version) HasHandshake() bool { return v.Supported() && !v.has().stateless }

// HasResultType reports whether every result carries "resultType".
func (v Version) HasResultType() bool { return v.has().stateless }

// HasCacheHints reports whether cacheable results (lists, reads,
// server/discover) must carry ttlMs and cacheScope.
func (v Version) HasCacheHints() bool { return v.has().stateless }

// HasServerInfoMeta reports whether results should name the server in
// _meta (io.modelcontextprotocol/serverInfo), there being no initialize.
func (v Version) HasServerInfoMeta() bool { return v.has().stateless }

// AllowsBatches reports whether JSON-RPC batch arrays are part of v.
func (v Version) AllowsBatches() bool { return v.has().batches }

// HasStructuredContent reports whether tools may declare outputSchema and
// results may carry structuredContent.
func (v Version) HasStructuredContent() bool { return v.has().structured }

// HasTitles reports whether Tool.title and Implementation.title exist.
func (v Version) HasTitles() bool { return v.has().titles }

// HasToolAnnotations reports whether Tool.annotations exists.
func (v Version) HasToolAnnotations() bool { return v.has().toolAnnotations }

// HasToolMeta reports whether Tool._meta exists.
func (v Version) HasToolMeta() bool { return v.has().meta }

// HasIcons reports whether icons and Implementation.description exist.
func (v Version) HasIcons() bool { return v.has().icons }

// HasProgressMessage reports whether notifications/progress has "message".
func (v Version) HasProgressMessage() bool { return v.has().progressMessage }

// HasResourceLinks reports whether resource_link content blocks exist.
func (v Version) HasResourceLinks() bool { return v.has().resourceLinks }

// HasElicitation reports whether the server may send elicitation/create
// (as its own request: 2026-07-28 asks inside results instead).
func (v Version) HasElicitation() bool { return v.has().elicitation }

// HasElicitationModes reports whether elicitation requests carry a mode
// and enums may be titled with oneOf (2025-11-25 on).
func (v Version) HasElicitationModes() bool { return v.has().elicitModes }

// HasAudio reports whether audio content blocks exist.
func (v Version) HasAudio() bool { return v.has().audio }

func (v Version) has() featureSet { f, _ := features(v); return f }
