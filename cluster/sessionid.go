package cluster

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
)

// idSeparator parts a clustered session id: "<32 hex>.<member>". The
// random part comes first so logs that show an id's first characters still
// tell sessions apart; member ids are base57 letters and digits, never a
// dot.
const idSeparator = "."

// NewSessionID makes a session id owned by member: 128 random bits (as
// strong as a single process's ids) followed by the member id, so any front
// can tell where the session lives without asking anyone. An empty member
// makes a plain id, as one process uses.
func NewSessionID(member string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	if member == "" {
		return id
	}
	return id + idSeparator + member
}

// OwnerOf returns the member a session id names, and false when the id
// names none (an id of a single process, or not one of troupe's at all).
func OwnerOf(sessionID string) (string, bool) {
	random, member, found := strings.Cut(sessionID, idSeparator)
	if !found || len(random) != 32 || member == "" || !validMember(member) {
		return "", false
	}
	return member, true
}

// validMember reports whether s can be a member id: letters and digits
// only, at most 64 of them (the actor system's ids are 22 base57 letters).
func validMember(s string) bool {
	if len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
