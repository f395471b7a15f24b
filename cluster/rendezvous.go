package cluster

import "hash/fnv"

// keyOwner is the member that owns a limit's key: the highest random
// weight (rendezvous) hash of the key over the live members. Every node
// computes the same owner from the same members, without asking anyone;
// when a member leaves, only the keys it owned move (each to the member
// with the next highest weight for it), and a member joining takes only
// the keys it now weighs highest for. No members: "".
func keyOwner(key string, members []string) string {
	var best string
	var bestWeight uint64
	for _, m := range members {
		w := weight(m, key)
		if best == "" || w > bestWeight || (w == bestWeight && m < best) {
			best, bestWeight = m, w
		}
	}
	return best
}

// weight is the member's random weight for key: FNV-1a of both, spread by
// a 64-bit finalizer (FNV alone changes only the low bits for keys that
// differ at the end, which would favour some members).
func weight(member, key string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(member))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(key))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
