package spool

import "strings"

// Across a cluster. The output of a 2026-07-28 call over HTTP stays on the
// node that ran it (its files are on that node's disk), but the client's
// next request may reach any node. So a cluster node names itself in such
// an output's id, troupe://output/<member>_<call id>/stdout, and a front
// that gets a resources/read of a link naming another member sends it
// there (mcphttp/cluster.go). "_" is in neither a member id (letters and
// digits) nor a call's correlation id ("c-" and hex), so the first "_"
// ends the member. Outputs of one process, and of sessions (whose every
// request already reaches the node that owns the session), name no node.

// nodeSeparator ends the member id at the start of an output id.
const nodeSeparator = "_"

// maxNodeLen bounds the member id an output id may name (the actor
// system's ids are 22 letters).
const maxNodeLen = 64

// NodeOutputID is the output id of call id run on cluster member node:
// id itself when node is "" (one process).
func NodeOutputID(node, id string) string {
	if node == "" {
		return id
	}
	return node + nodeSeparator + id
}

// NodeOf returns the cluster member an output URI
// (troupe://output/<id>/<stream>…) names, and false when it names none: a
// URI that is not an output's, or whose id does not start with a member
// id (letters and digits) and "_". What it names comes from the client:
// the member must still be looked up in the cluster, and the node that
// keeps the output checks the read as any other.
func NodeOf(uri string) (string, bool) {
	rest, ok := strings.CutPrefix(uri, URIPrefix)
	if !ok {
		return "", false
	}
	id, _, _ := strings.Cut(rest, "/")
	node, _, found := strings.Cut(id, nodeSeparator)
	if !found || node == "" || len(node) > maxNodeLen {
		return "", false
	}
	for _, c := range node {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return "", false
		}
	}
	return node, true
}
