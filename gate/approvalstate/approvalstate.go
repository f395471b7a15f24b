// Package approvalstate seals and opens the requestState of troupe's
// approvals in the stateless MCP revision (2026-07-28), where a call that
// needs a person's approval is answered with resultType "input_required"
// and the client retries it with the person's answer and the state it was
// given (multi round-trip requests, MRTR). The state passes through the
// client, so the spec makes it attacker-controlled input: troupe seals it
// with an AEAD under a server key and refuses, with a distinct error each,
// a state that is
//
//   - malformed, or sealed under a key this server does not hold
//     (ErrMalformed, ErrUnknownKey);
//   - modified or forged (ErrTampered);
//   - presented by another caller than the one it was issued to
//     (ErrOtherCaller);
//   - presented to another node of a cluster than the one that issued it
//     (ErrOtherNode; see "Across a cluster");
//   - presented after its expiry, approvals.timeout after it was sealed
//     (ErrExpired);
//   - presented with another tool or another call: other arguments,
//     working directory, environment or sandbox profile, everything
//     gate.Hash binds (ErrOtherTool, ErrOtherCall);
//   - already used (ErrReplayed).
//
// and it refuses to seal a state for a caller that has its whole share
// outstanding (ErrCallerBusy), while other callers go on.
//
// The package is pure: no actors, no I/O but the random source. The MRTR
// wiring seals a state with the input_required result and opens it when
// the retry arrives, before anything runs.
//
// # What a state binds
//
// The call's hash (gate.Hash: tool, arguments, cwd, env, sandbox profile)
// and the tool's name; the caller (an HTTP client's credential, or one
// stdio connection); the decisions the person was offered (Offer); an
// expiry; a random nonce; and an optional payload the wiring needs on the
// retry (a downstream server's own requestState, the name of a call held
// open on this process). It is encrypted as well as authenticated, so the
// client learns nothing from it (the spec forbids clients to look inside).
//
// # Once means once
//
// The Sealer remembers each state's nonce until the state expires, from
// Seal on, so a state opens once: a "once" approval runs one call. Check
// verifies a state as Open does and uses nothing up, for a retry that
// brings no answer (asked again under the same state).
//
// # Outstanding states, per caller
//
// A state is outstanding from the moment it is sealed until it expires,
// answered or not: its nonce has to be remembered that long (forgetting a
// used one would let it open again, so answering frees nothing early).
// Memory is therefore bounded per caller (Options.MaxPerCaller): a caller
// with its whole share outstanding is refused new states (ErrCallerBusy,
// a *BusyError) until some expire, and no other caller notices. Check
// adds nothing, so a retry that answers nothing, checked rather than
// opened, costs nothing; a state another process sealed (a shared key)
// counts against its caller from when it is first opened here. A total
// bound (Options.MaxOutstanding, 16 shares wide by default) caps the
// memory of all callers together; it is reached only when that many
// callers fill their shares at once. Nothing is ever forgotten before it
// expires to make room.
//
// The caller is the key of a share: today an HTTP credential or a stdio
// connection (see Caller); an authenticated identity, once troupe has
// them, becomes one more kind of Caller and gets its own share.
//
// # Across processes
//
// The memory of states lives in one process and nothing shares it. Several troupe
// processes that share approvals.state_key open each other's states, and
// then a state could be redeemed once in each of them before it expires:
// "once" holds per process, and across N processes behind one endpoint a
// state can run its call at most N times within approvals.timeout, and
// only for the caller it was issued to, with the same arguments. A
// deployment that needs "once" across processes routes a caller to one
// process (sticky routing), runs one process, or runs a cluster (below).
// Without a configured key each process generates its own, and a state
// opens only in the process that sealed it (another process refuses it
// with ErrUnknownKey): then once is exact, but a retry must reach the same
// process.
//
// # Across a cluster
//
// The nodes of a cluster share the key, and each names itself in the
// states it seals (Options.Node, SetNode: its member id), inside the
// sealed payload where no client can change it. A node opens only the
// states that name it (ErrOtherNode otherwise, also for a state that
// names no node), so its own memory is the whole memory a state needs and
// "once" holds across the cluster. Any node may read, with IssuedBy, which
// node a state names, having authenticated it: the HTTP front forwards a
// retry to that node. A process outside a cluster names no node, and its
// states open as they always did.
//
// # "For this session" without a session
//
// The stateless revision has no session to remember a "for this session"
// answer in. troupe therefore offers it only where something session-like
// exists on one process: a stdio connection (one client, one process; the
// grant ends with the connection, as a session's did). An HTTP caller in
// this revision is offered "once" and "deny" only: a grant to a
// credential would outlive the client's own notion of its session, would
// cover every client sharing a token (or, without a token, every local
// client), and would hold on one process only behind a load balancer.
// OfferFor encodes this decision.
//
// # Keys
//
// A state key is 32 random bytes (approvals.state_key, base64 or hex).
// From it troupe derives, with HKDF-SHA256, the AES-256-GCM key and a
// 4-byte key id that prefixes every state; Open picks the key by id, so
// keys listed in approvals.previous_state_keys still open the states they
// sealed while a rotation is under way (at most approvals.timeout), and
// new states are always sealed under the current key.
package approvalstate

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// The refusals Open gives. Each is wrapped with detail; test with
// errors.Is. None of them says anything about the state's contents to a
// caller it was not issued to.
var (
	// ErrMalformed: not a state troupe produced (encoding, length, format
	// version).
	ErrMalformed = errors.New("the approval state is malformed (not a requestState troupe issued)")
	// ErrUnknownKey: sealed under a key this server does not hold: another
	// server's, a key rotated out, or another process's generated key.
	ErrUnknownKey = errors.New("the approval state was sealed under a key this server does not hold " +
		"(another server or process, or a key rotated out)")
	// ErrTampered: the AEAD refused it: modified or forged.
	ErrTampered = errors.New("the approval state failed verification (modified or forged)")
	// ErrOtherCaller: issued to another credential or connection.
	ErrOtherCaller = errors.New("the approval state was issued to another caller")
	// ErrExpired: presented after its expiry.
	ErrExpired = errors.New("the approval state has expired")
	// ErrOtherTool: issued for a call of another tool.
	ErrOtherTool = errors.New("the approval state was issued for another tool")
	// ErrOtherCall: issued for the same tool with other arguments, working
	// directory, environment or sandbox profile.
	ErrOtherCall = errors.New("the approval state was issued for another call of this tool " +
		"(other arguments, working directory, environment or sandbox profile)")
	// ErrOtherNode: sealed by another node of the cluster (or, on a
	// cluster node, by a process outside the cluster): only the node that
	// issued a state can tell whether it was used.
	ErrOtherNode = errors.New("the approval state was issued by another troupe node, which alone can redeem it")
	// ErrReplayed: the state was already used.
	ErrReplayed = errors.New("the approval state was already used")
	// ErrBusy: a bound of outstanding states is full (see BusyError; a
	// caller's own share is ErrCallerBusy as well).
	ErrBusy = errors.New("too many approval states are outstanding")
	// ErrNotOffered: the answer is a decision the person was not offered.
	ErrNotOffered = errors.New("the answer is not one of the decisions offered")
)

// formatVersion is the first byte of every state.
const formatVersion = 1

// Sizes of a state's parts.
const (
	keyIDSize  = 4
	headerSize = 1 + keyIDSize
	nonceSize  = 16
)

// MaxPayload bounds Request.Payload: a state travels in every retry.
const MaxPayload = 16 << 10

// maxStateLen bounds a state, so Open never decodes more than Seal could
// have made: MaxPayload, twice base64-encoded, leaves room for the rest.
const maxStateLen = 40 << 10

// DefaultMaxPerCaller is a caller's share of outstanding states when
// Options.MaxPerCaller is zero.
const DefaultMaxPerCaller = 1024

// sharesInTotal is how many callers' full shares the total bound holds
// when Options.MaxOutstanding is zero.
const sharesInTotal = 16

// aad is the additional data every state is sealed with, besides its
// header: a state of another purpose never opens as an approval state.
const aad = "troupe approval requestState v1\x00"

// encoding is base64url without padding, strict (and Open refuses the
// line breaks the decoder would skip): one string per state, so a changed
// character is always a refused state.
var encoding = base64.RawURLEncoding.Strict()

// Options configure a Sealer.
type Options struct {
	// Key seals new states and opens them.
	Key Key
	// Previous keys still open the states they sealed (rotation).
	Previous []Key
	// TTL is how long a state stays valid: approvals.timeout, the time a
	// person has to answer. It must be positive.
	TTL time.Duration
	// MaxPerCaller is one caller's share: the states it may have
	// outstanding (sealed and not expired) at once. Zero means
	// DefaultMaxPerCaller, or MaxOutstanding when that is smaller.
	MaxPerCaller int
	// MaxOutstanding bounds the states of all callers together (a memory
	// bound). Zero means 16 shares.
	MaxOutstanding int
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// Node is the cluster member id of this process, named in every state
	// it seals and required of every state it opens; "" outside a cluster
	// (SetNode sets it once the process has joined).
	Node string
}

// Sealer seals and opens approval states under one current key and any
// previous ones. It is safe for concurrent use.
type Sealer struct {
	current [keyIDSize]byte
	aeads   map[[keyIDSize]byte]cipher.AEAD
	ttl     time.Duration
	now     func() time.Time
	node    atomic.Pointer[string] // this cluster member's id; "" outside a cluster

	mu     sync.Mutex
	ledger *ledger
}

// New makes a Sealer. It refuses a non-positive TTL, a key given twice and
// (with odds of 2⁻³² per pair) two keys whose ids collide.
func New(o Options) (*Sealer, error) {
	if o.TTL <= 0 {
		return nil, fmt.Errorf("approval states: the expiry must be positive, got %s", o.TTL)
	}
	if o.MaxOutstanding < 0 || o.MaxPerCaller < 0 {
		return nil, fmt.Errorf("approval states: the bounds of outstanding states must not be negative, got %d per caller and %d in all",
			o.MaxPerCaller, o.MaxOutstanding)
	}
	perCaller, total := o.MaxPerCaller, o.MaxOutstanding
	if perCaller == 0 {
		perCaller = DefaultMaxPerCaller
		if total > 0 {
			perCaller = min(perCaller, total)
		}
	}
	if total == 0 {
		total = sharesInTotal * perCaller
	}
	now := o.Now
	if now == nil {
		now = time.Now
	}
	s := &Sealer{aeads: map[[keyIDSize]byte]cipher.AEAD{}, ttl: o.TTL, now: now, ledger: newLedger(total, perCaller)}
	s.node.Store(&o.Node)
	for i, k := range append([]Key{o.Key}, o.Previous...) {
		id, aead, err := k.derive()
		if err != nil {
			return nil, err
		}
		if _, dup := s.aeads[id]; dup {
			return nil, fmt.Errorf("approval states: previous key %d is the same as another key (or its id collides with one: generate another)", i)
		}
		s.aeads[id] = aead
		if i == 0 {
			s.current = id
		}
	}
	return s, nil
}

// SetNode names the cluster member this process is, once it has joined:
// states sealed from now on name it, and only states that name it open.
// A process joins before it serves HTTP, so its HTTP callers never hold a
// state sealed before.
func (s *Sealer) SetNode(node string) { s.node.Store(&node) }

// Node is the cluster member this Sealer's states name ("" outside a
// cluster).
func (s *Sealer) Node() string { return *s.node.Load() }

// TTL is how long the states this Sealer seals stay valid.
func (s *Sealer) TTL() time.Duration { return s.ttl }

// Binding is what a state is bound to and checked against when it comes
// back: the call and its caller.
type Binding struct {
	// Tool is the name of the tool called.
	Tool string
	// Hash is gate.Hash of the call (tool, arguments, cwd, env, profile).
	Hash string
	// Caller is who made the call.
	Caller Caller
}

// Request is what Seal binds into a state.
type Request struct {
	Binding
	// Offer is the set of decisions the person is asked to choose from.
	Offer Offer
	// Payload is carried to the retry as it is (at most MaxPayload bytes):
	// what the wiring needs then, such as a downstream server's own
	// requestState.
	Payload []byte
}

// Approval is an opened state: what the person was asked about, ready
// for their answer.
type Approval struct {
	Tool    string
	Hash    string
	Offer   Offer
	Payload []byte
	// Expires is when the state stopped being valid.
	Expires time.Time

	nonce [nonceSize]byte // the state's, for the single use
}

// Choose maps the person's answer ("once", "session", "deny") to a
// Decision, refusing one that was not offered (ErrNotOffered).
func (a *Approval) Choose(answer string) (Decision, error) {
	d, ok := parseDecision(answer)
	if !ok || !a.Offer.Has(d) {
		return 0, fmt.Errorf("%w: %q (offered: %s)", ErrNotOffered, answer, a.Offer)
	}
	return d, nil
}

// sealed is a state's plaintext.
type sealed struct {
	Tool    string `json:"t"`
	Hash    string `json:"h"`
	Caller  []byte `json:"c"`
	Offer   Offer  `json:"o"`
	Expires int64  `json:"e"` // Unix milliseconds
	Nonce   []byte `json:"n"`
	Payload []byte `json:"p,omitempty"`
	Node    string `json:"nd,omitempty"` // the cluster member that sealed it
}

// Seal makes the opaque requestState for r, valid for the Sealer's TTL,
// and counts it against r.Caller's share until it expires. A caller with
// its share full is refused with a *BusyError (ErrCallerBusy); so are all
// callers when the total is.
func (s *Sealer) Seal(r Request) (string, error) {
	switch {
	case !r.Caller.valid():
		return "", errors.New("approval states: a state must be bound to a caller")
	case r.Tool == "" || r.Hash == "":
		return "", errors.New("approval states: a state must be bound to a tool and a call hash")
	case r.Offer == 0 || r.Offer&^allDecisions != 0:
		return "", fmt.Errorf("approval states: invalid offer %d", r.Offer)
	case len(r.Payload) > MaxPayload:
		return "", fmt.Errorf("approval states: payload of %d bytes exceeds %d", len(r.Payload), MaxPayload)
	}
	digest := r.Caller.digest()
	now := s.now()
	var nonce [nonceSize]byte
	_, _ = rand.Read(nonce[:]) // never fails (crypto/rand)
	p := sealed{Tool: r.Tool, Hash: r.Hash, Caller: digest[:], Offer: r.Offer,
		Expires: now.Add(s.ttl).UnixMilli(), Nonce: nonce[:], Payload: r.Payload, Node: s.Node()}
	plain, err := json.Marshal(p)
	if err != nil {
		return "", fmt.Errorf("approval states: %w", err)
	}
	header := make([]byte, headerSize, headerSize+len(plain)+s.aeads[s.current].Overhead())
	header[0] = formatVersion
	copy(header[1:], s.current[:])
	out := encoding.EncodeToString(s.aeads[s.current].Seal(header, nil, plain, additional(header)))
	if len(out) > maxStateLen {
		return "", fmt.Errorf("approval states: the state would be %d characters, more than %d (a tool name of %d bytes)",
			len(out), maxStateLen, len(r.Tool))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.expire(now.UnixMilli())
	if err := s.ledger.add(nonce, r.Caller, p.Expires, false, s.ttl); err != nil {
		return "", err
	}
	return out, nil
}

// Open checks state against the call it comes back with and, when every
// check passes, uses it up: the same state never opens twice in this
// process. Nothing in an error comes from inside a state that failed the
// caller check.
func (s *Sealer) Open(state string, b Binding) (*Approval, error) {
	a, err := s.verify(state, b)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	err = s.ledger.use(a.nonce, b.Caller, a.Expires.UnixMilli(), s.now().UnixMilli(), s.ttl)
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Check is Open without using the state up: every check passes (it is
// not used yet either) or Check refuses as Open would. A retry that
// carries a state but no answer is checked and asked again under the same
// state, so it neither spends the state nor adds one.
func (s *Sealer) Check(state string, b Binding) (*Approval, error) {
	a, err := s.verify(state, b)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	err = s.ledger.check(a.nonce, s.now().UnixMilli())
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return a, nil
}

// IssuedBy authenticates state (decoding, key, authenticity) and returns
// the cluster member that sealed it ("" for a process outside a cluster).
// It checks nothing else and uses nothing up: the HTTP front calls it to
// send a retry to the node that can redeem it, which then checks all.
func (s *Sealer) IssuedBy(state string) (string, error) {
	p, err := s.authenticate(state)
	if err != nil {
		return "", err
	}
	return p.Node, nil
}

// verify is every check of Open but the single use: decoding, key,
// authenticity, caller, node, expiry, tool and call.
func (s *Sealer) verify(state string, b Binding) (*Approval, error) {
	p, err := s.authenticate(state)
	if err != nil {
		return nil, err
	}
	digest := b.Caller.digest()
	if !b.Caller.valid() || !bytes.Equal(p.Caller, digest[:]) {
		return nil, ErrOtherCaller
	}
	if p.Node != s.Node() {
		return nil, ErrOtherNode
	}
	now := s.now()
	expires := time.UnixMilli(p.Expires)
	if !now.Before(expires) {
		return nil, fmt.Errorf("%w: it was valid until %s (approvals.timeout is %s)", ErrExpired,
			expires.UTC().Format(time.RFC3339), s.ttl)
	}
	if p.Tool != b.Tool {
		return nil, fmt.Errorf("%w: issued for %q, presented with %q", ErrOtherTool, p.Tool, b.Tool)
	}
	if p.Hash != b.Hash {
		return nil, ErrOtherCall
	}
	a := &Approval{Tool: p.Tool, Hash: p.Hash, Offer: p.Offer, Payload: p.Payload, Expires: expires}
	copy(a.nonce[:], p.Nonce)
	return a, nil
}

// authenticate decodes state, picks its key, opens it and reads its
// contents: a state troupe sealed under a key this process holds.
func (s *Sealer) authenticate(state string) (*sealed, error) {
	if len(state) > maxStateLen {
		return nil, fmt.Errorf("%w: %d characters, more than any state troupe issues", ErrMalformed, len(state))
	}
	// The decoder skips line breaks; a state has none.
	raw, err := encoding.DecodeString(state)
	if err != nil || strings.ContainsAny(state, "\r\n") {
		return nil, fmt.Errorf("%w: not base64url", ErrMalformed)
	}
	if len(raw) < headerSize {
		return nil, fmt.Errorf("%w: too short", ErrMalformed)
	}
	if raw[0] != formatVersion {
		return nil, fmt.Errorf("%w: unknown format %d", ErrMalformed, raw[0])
	}
	var id [keyIDSize]byte
	copy(id[:], raw[1:headerSize])
	aead, ok := s.aeads[id]
	if !ok {
		return nil, ErrUnknownKey
	}
	plain, err := aead.Open(nil, nil, raw[headerSize:], additional(raw[:headerSize]))
	if err != nil {
		return nil, ErrTampered
	}
	var p sealed
	dec := json.NewDecoder(bytes.NewReader(plain))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil || dec.More() || len(p.Nonce) != nonceSize || len(p.Caller) != sha256.Size ||
		p.Offer == 0 || p.Offer&^allDecisions != 0 {
		// Authentic but not ours to read: a key shared with something else.
		return nil, fmt.Errorf("%w: unreadable contents", ErrMalformed)
	}
	return &p, nil
}

// Outstanding is how many states this process remembers for every caller
// (sealed or opened here, not expired; for tests and metrics): never more
// than Options.MaxOutstanding.
func (s *Sealer) Outstanding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.expire(s.now().UnixMilli())
	return s.ledger.len()
}

// OutstandingFor is how many states caller has outstanding: never more
// than its share, Options.MaxPerCaller.
func (s *Sealer) OutstandingFor(caller Caller) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ledger.expire(s.now().UnixMilli())
	return s.ledger.outstanding(caller)
}

// additional is the AEAD's additional data for a state's header.
func additional(header []byte) []byte {
	return append([]byte(aad), header...)
}

// Key is a state key: 32 random bytes.
type Key [32]byte

// NewKey returns a random key, for a process without a configured one.
func NewKey() Key {
	var k Key
	_, _ = rand.Read(k[:]) // never fails (crypto/rand)
	return k
}

// ParseKey reads a key written as base64 (standard or URL alphabet, with
// or without padding) or hex. Its errors never quote the value.
func ParseKey(s string) (Key, error) {
	var k Key
	s = strings.TrimSpace(s)
	var candidates [][]byte
	if b, err := hex.DecodeString(s); err == nil {
		candidates = append(candidates, b)
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			candidates = append(candidates, b)
		}
	}
	for _, b := range candidates {
		if len(b) == len(k) {
			copy(k[:], b)
			return k, nil
		}
	}
	if len(candidates) > 0 {
		return k, fmt.Errorf("must be 32 bytes, got %d: write 32 random bytes as base64 (44 characters; "+
			"`openssl rand -base64 32`) or hex (64 characters)", len(candidates[len(candidates)-1]))
	}
	return k, fmt.Errorf("is neither base64 nor hex (%d characters): write 32 random bytes as base64 "+
		"(44 characters; `openssl rand -base64 32`) or hex (64 characters)", len(s))
}

// derive makes the key's id and its AEAD (HKDF-SHA256, then AES-256-GCM
// with random 96-bit nonces).
func (k Key) derive() ([keyIDSize]byte, cipher.AEAD, error) {
	var id [keyIDSize]byte
	sub, err := hkdf.Key(sha256.New, k[:], nil, "troupe approval state aead v1", 32)
	if err != nil {
		return id, nil, fmt.Errorf("approval states: deriving the key: %w", err)
	}
	tag, err := hkdf.Key(sha256.New, k[:], nil, "troupe approval state key id v1", keyIDSize)
	if err != nil {
		return id, nil, fmt.Errorf("approval states: deriving the key id: %w", err)
	}
	copy(id[:], tag)
	block, err := aes.NewCipher(sub)
	if err != nil {
		return id, nil, fmt.Errorf("approval states: %w", err)
	}
	aead, err := cipher.NewGCMWithRandomNonce(block)
	if err != nil {
		return id, nil, fmt.Errorf("approval states: %w", err)
	}
	return id, aead, nil
}

// Caller is who a state is issued to: an HTTP client's credential or one
// stdio connection. The zero Caller binds nothing and Seal refuses it.
type Caller struct {
	kind byte // 'c' credential, 's' stdio connection
	id   string
}

// CredentialCaller is an HTTP caller, named by the SHA-256 of its bearer
// token (what mcphttp binds sessions to). Without a configured token every
// HTTP client is the zero credential: one caller, as it is one principal.
func CredentialCaller(sum [32]byte) Caller {
	return Caller{kind: 'c', id: string(sum[:])}
}

// ConnectionCaller is a stdio connection, named by an id that never
// repeats (a random one per connection); an empty id is no caller.
func ConnectionCaller(id string) Caller {
	if id == "" {
		return Caller{}
	}
	return Caller{kind: 's', id: id}
}

// IsConnection reports whether c is a stdio connection.
func (c Caller) IsConnection() bool { return c.kind == 's' }

func (c Caller) valid() bool { return c.kind != 0 }

// String names the kind of caller, never its credential.
func (c Caller) String() string {
	switch c.kind {
	case 'c':
		return "credential"
	case 's':
		return "stdio connection"
	}
	return "nobody"
}

// digest is what a state stores of its caller.
func (c Caller) digest() [32]byte {
	var b []byte
	b = append(b, "troupe approval caller\x00"...)
	b = append(b, c.kind)
	b = binary.BigEndian.AppendUint32(b, uint32(len(c.id)))
	b = append(b, c.id...)
	return sha256.Sum256(b)
}

// Decision is one answer a person can give.
type Decision uint8

// The decisions, as bits of an Offer.
const (
	// Once approves this one call.
	Once Decision = 1 << iota
	// Session approves the tool for the rest of the stdio connection.
	Session
	// Deny refuses the call.
	Deny
)

const allDecisions = Offer(Once | Session | Deny)

// String is the decision's value in the approval form.
func (d Decision) String() string {
	switch d {
	case Once:
		return "once"
	case Session:
		return "session"
	case Deny:
		return "deny"
	}
	return fmt.Sprintf("decision(%d)", uint8(d))
}

func parseDecision(s string) (Decision, bool) {
	for _, d := range []Decision{Once, Session, Deny} {
		if s == d.String() {
			return d, true
		}
	}
	return 0, false
}

// Offer is the set of decisions a person is asked to choose from.
type Offer uint8

// OfferFor is what troupe offers a caller in the stateless revision: once,
// for the rest of the connection, or deny to a stdio connection; once or
// deny to an HTTP caller (see the package doc).
func OfferFor(c Caller) Offer {
	if c.IsConnection() {
		return allDecisions
	}
	return Offer(Once | Deny)
}

// Has reports whether d is offered.
func (o Offer) Has(d Decision) bool { return d != 0 && Offer(d)&o == Offer(d) }

// Decisions lists the offered decisions in form order.
func (o Offer) Decisions() []Decision {
	var out []Decision
	for _, d := range []Decision{Once, Session, Deny} {
		if o.Has(d) {
			out = append(out, d)
		}
	}
	return out
}

// String lists the offered decisions' form values.
func (o Offer) String() string {
	var b []byte
	for i, d := range o.Decisions() {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, d.String()...)
	}
	return string(b)
}
