// Package pins keeps what troupe trusted of its downstream servers' tools
// and prompts, and holds those that changed since.
//
// A downstream server can change a tool after people came to trust it (a
// "rug pull": the description now tells the model to read ~/.ssh and send
// it along, or the schema grows a field). troupe pins each tool and prompt
// the first time it sees it: a Def (what a model and a person read of it:
// name, title, description, schemas and annotations for a tool; name,
// title, description and arguments for a prompt) and its Hash. A later
// listing whose Def hashes differently is a change, and the server's mode
// (config: [mcp_servers.<name>] on_change) decides what troupe does:
//
//   - Hold (the default): the tool is left out of tools/list and its calls
//     are refused, naming the change, until an operator accepts it;
//   - Ask: the tool stays listed and every call asks a person, the prompt
//     showing the change (Change.Lines, a diff with every character that
//     could hide or reorder text made visible);
//   - Accept: the change is pinned at once (servers the operator controls).
//
// A listing that changes back to the pinned version is trusted again. An
// operator accepts a held version with Keeper.Accept (troupe tools
// --accept, or the status page).
//
// The pins live in a Store: a file in troupe's state directory (FileStore,
// one of troupe's own files: refused where runs write, hidden from runs),
// or, on a cluster, the store the nodes share. Keeper is the pure part: it
// compares listings with the pins, records what it saw and returns the
// Events to report (audit, metrics, warnings), one per server and kind
// however many of its tools changed at once.
package pins

import "time"

// Kind is what a pin is of.
type Kind string

// The kinds of pins.
const (
	Tool   Kind = "tool"
	Prompt Kind = "prompt"
)

// Mode is what troupe does with a changed tool or prompt of a server
// ([mcp_servers.<name>] on_change).
type Mode string

// The modes; the zero Mode is Hold.
const (
	Hold   Mode = "hold"
	Ask    Mode = "ask"
	Accept Mode = "accept"
)

// ParseMode is the Mode named s ("" is Hold), or false.
func ParseMode(s string) (Mode, bool) {
	switch Mode(s) {
	case "", Hold:
		return Hold, true
	case Ask, Accept:
		return Mode(s), true
	}
	return "", false
}

// Doc is every pin of a store: what the file holds.
type Doc struct {
	// Version is the document's format, 1.
	Version int `json:"version"`
	// Servers are the pins of each downstream server, by its name in
	// [mcp_servers].
	Servers map[string]*Server `json:"servers,omitempty"`
}

// docVersion is the format Doc is written in.
const docVersion = 1

// Server is one downstream server's pins.
type Server struct {
	Tools   map[string]*Entry `json:"tools,omitempty"`
	Prompts map[string]*Entry `json:"prompts,omitempty"`
}

// Entry is one tool's or prompt's pin, by its name on its server.
type Entry struct {
	// Pinned is the version troupe trusts.
	Pinned Version `json:"pinned"`
	// Held is the changed version troupe last saw and did not trust; nil
	// when the listing matches Pinned. Accepting pins it.
	Held *Version `json:"held,omitempty"`
}

// Version is one definition of a tool or prompt as troupe saw it.
type Version struct {
	Hash string `json:"hash"`
	Def  Def    `json:"def"`
	// Since is when troupe first saw this version.
	Since time.Time `json:"since"`
	// By says who trusted it: ByFirstUse, ByOnChange, or the operator's
	// identity ("token:ops", "local:alice"); empty for a held version.
	By string `json:"by,omitempty"`
}

// Who pinned a version, besides an operator's identity.
const (
	// ByFirstUse is a version pinned when troupe first saw the tool.
	ByFirstUse = "first use"
	// ByOnChange is a change pinned by the server's on_change = "accept".
	ByOnChange = `on_change = "accept"`
)

// server returns d's pins of name, made when missing.
func (d *Doc) server(name string) *Server {
	if d.Servers == nil {
		d.Servers = map[string]*Server{}
	}
	s := d.Servers[name]
	if s == nil {
		s = &Server{}
		d.Servers[name] = s
	}
	return s
}

// entries returns s's pins of kind k, made when missing.
func (s *Server) entries(k Kind) map[string]*Entry {
	p := &s.Tools
	if k == Prompt {
		p = &s.Prompts
	}
	if *p == nil {
		*p = map[string]*Entry{}
	}
	return *p
}

// lookup is d's entry of server's kind k named name, or nil.
func (d *Doc) lookup(server string, k Kind, name string) *Entry {
	s := d.Servers[server]
	if s == nil {
		return nil
	}
	if k == Prompt {
		return s.Prompts[name]
	}
	return s.Tools[name]
}
