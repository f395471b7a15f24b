package actors

import "troupe/tools"

// trustList is the tools a person trusted for the rest of a session
// ("Allow X for the rest of this session"), each as the fingerprint of the
// tool they saw: a tool that changed since (a reload, a downstream server
// re-listing it differently) is asked about again. The zero value trusts
// nothing; it is the session's alone.
type trustList map[string][32]byte

// grant trusts tool as it was when the person saw it.
func (t *trustList) grant(tool string, fingerprint [32]byte) {
	if *t == nil {
		*t = trustList{}
	}
	(*t)[tool] = fingerprint
}

// fingerprint is the fingerprint tool was trusted with, nil when it was
// not: the invocation compares it with the tool's current one.
func (t trustList) fingerprint(tool string) *[32]byte {
	if p, ok := t[tool]; ok {
		return &p
	}
	return nil
}

// sessionMayTrust reports whether a person may trust spec's tool for the
// session: not a tool that changed since it was trusted and that no
// operator accepted (tools.Safety.Unaccepted), which asks at every call.
// The form does not offer it (gate.Form); this holds also against an
// answer that asks for it anyway (Codex's persist, a stale form).
func sessionMayTrust(spec tools.Spec) bool { return !spec.Safety.Unaccepted() }
