// Package cluster runs several troupe processes as one: each node owns the
// sessions it initialized, and any node's HTTP front serves any request by
// carrying it to the owner over protoactor's remote.
//
// Why sessions are not cluster grains: a grain moves when members join or
// leave, and a session owns running processes that cannot move. So a
// session stays the actor of the node that answered its initialize, and its
// id names that node (NewSessionID, OwnerOf). Membership comes from
// protoactor's cluster with the etcd provider; troupe reads it only from
// the ClusterTopology events (the library's member list races with gossip
// when read directly).
//
// A forwarded request is the whole HTTP request (method, headers, body):
// the owner serves it with its own mcphttp handler, which checks it again,
// on a ResponseWriter whose writes travel back as ordered Parts to a
// per-request stream actor on the front. A credit window bounds what is in
// flight, so a slow client slows the owner's writer instead of growing a
// queue. A request is never delivered twice: when the owner is gone the
// front answers 404 (or ends an open stream with an error naming the lost
// session) and the client initializes again.
//
// A Node also keeps the cluster healthy from its side (watchdog.go): it
// leaves, and its process exits to be restarted with a new identity, when
// it is the odd one out of a split the library cannot heal by itself
// (etcd lost it, most peers do not see it, or none answers it).
//
// Limits per identity hold for the cluster (Node.Limits, limits.go): each
// counter's key has one owner member, the rendezvous hash of the key over
// the live members, which every node computes alike; the others ask it
// over the remote. A counter lost with its owner starts afresh elsewhere.
package cluster
