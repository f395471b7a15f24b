package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"troupe/pins"
)

// pinsKeyPrefix is where a cluster keeps its pins: one key per downstream
// server, "/troupe/<cluster>/pins/<server>". Per server rather than one
// key for the whole document: etcd refuses a value over 1.5 MiB, and one
// server's tools (each pinned version with its schemas, and a held one
// beside it) fit that bound where a gateway's every server might not.
const pinsKeyPrefix = "/troupe/"

// pinsValueLimit is the largest value written: etcd's default request
// limit (--max-request-bytes, 1.5 MiB) less room for the key and the
// request's framing.
const pinsValueLimit = 1536*1024 - 4096

// pinsMaxServersPerUpdate is etcd's default --max-txn-ops: a transaction
// writes at most this many keys.
const pinsMaxServersPerUpdate = 128

// pinsFormat is the pins.Doc format this troupe writes and reads (pins'
// own file format, version 1).
const pinsFormat = 1

// pinsRetryPause is the wait before watching again after etcd ended a
// watch (compaction, a lost leader): short, and the watch's changed call
// then covers what may have been missed.
const pinsRetryPause = 500 * time.Millisecond

// pinsMaxRetryPause bounds the pause between watches that etcd keeps
// ending.
const pinsMaxRetryPause = 15 * time.Second

// PinStore is the pins of a cluster's downstream servers in etcd
// (pins.Store): every node reads and writes the same pins, so a version
// an operator accepts on one node is accepted on all, and a change two
// nodes see at once is recorded (and reported) once.
//
// Each server's pins are one key whose value is a pins.Doc holding that
// server alone (the pins file's JSON, with its format version). Update is
// a compare-and-swap: it reads every key at one revision, applies the
// change, and writes in a transaction that succeeds only if no key under
// the prefix was written since that revision; otherwise it reads again
// and applies the change again. Nothing ever deletes a key (a server
// left out of the config keeps its pins, as in the file), so that compare
// sees every concurrent write.
type PinStore struct {
	cli    *clientv3.Client
	prefix string
}

// NewPinStore is the pins of the cluster named name, kept through cli
// (the node's etcd client: same endpoints and TLS).
func NewPinStore(cli *clientv3.Client, name string) *PinStore {
	return &PinStore{cli: cli, prefix: pinsKeyPrefix + name + "/pins/"}
}

// PinStore is the node's store of pins in etcd; it uses the node's etcd
// client and ends with the node (Close).
func (n *Node) PinStore() pins.Store {
	return NewPinStore(n.etcd, n.opts.Name)
}

// Load reads every server's pins at one revision.
func (s *PinStore) Load(ctx context.Context) (*pins.Doc, error) {
	d, _, err := s.read(ctx)
	return d, err
}

// read returns the pins and the revision they were read at.
func (s *PinStore) read(ctx context.Context) (*pins.Doc, int64, error) {
	resp, err := s.cli.Get(ctx, s.prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, 0, fmt.Errorf("pins: etcd: %w", err)
	}
	d := &pins.Doc{Version: pinsFormat}
	for _, kv := range resp.Kvs {
		name := strings.TrimPrefix(string(kv.Key), s.prefix)
		srv, err := decodeServer(name, kv.Value)
		if err != nil {
			return nil, 0, err
		}
		if srv == nil {
			continue
		}
		if d.Servers == nil {
			d.Servers = map[string]*pins.Server{}
		}
		d.Servers[name] = srv
	}
	return d, resp.Header.Revision, nil
}

// decodeServer reads one key's value: a pins.Doc of the server name.
func decodeServer(name string, b []byte) (*pins.Server, error) {
	var d pins.Doc
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("pins: etcd's pins of server %s are not pins JSON: %w", name, err)
	}
	if d.Version > pinsFormat {
		return nil, fmt.Errorf("pins: etcd's pins of server %s have format %d; this troupe reads up to %d "+
			"(a newer troupe wrote them)", name, d.Version, pinsFormat)
	}
	return d.Servers[name], nil
}

// serverValue is server name's pins as its key's value: a pins.Doc of
// that server alone.
func serverValue(name string, srv *pins.Server) ([]byte, error) {
	b, err := json.Marshal(&pins.Doc{Version: pinsFormat, Servers: map[string]*pins.Server{name: srv}})
	if err != nil {
		return nil, fmt.Errorf("pins: %w", err)
	}
	return b, nil
}

// encodeServer is the value of server name's key, refused past etcd's
// limit.
func encodeServer(name string, srv *pins.Server) ([]byte, error) {
	b, err := serverValue(name, srv)
	if err != nil {
		return nil, err
	}
	if len(b) > pinsValueLimit {
		return nil, fmt.Errorf("pins: the pins of server %s are %d bytes, more than etcd keeps in one value "+
			"(%d): not recorded", name, len(b), pinsValueLimit)
	}
	return b, nil
}

// Update applies change to the pins and writes the servers it changed,
// again and again until no other writer came between the read and the
// write (or ctx ends).
func (s *PinStore) Update(ctx context.Context, change func(*pins.Doc) (bool, error)) (*pins.Doc, error) {
	for {
		d, rev, err := s.read(ctx)
		if err != nil {
			return nil, err
		}
		before, err := encodeAll(d)
		if err != nil {
			return nil, err
		}
		write, err := change(d)
		if err != nil || !write {
			return d, err
		}
		var ops []clientv3.Op
		for _, name := range slices.Sorted(maps.Keys(d.Servers)) {
			if d.Servers[name] == nil {
				continue
			}
			b, err := encodeServer(name, d.Servers[name])
			if err != nil {
				return nil, err
			}
			if !bytes.Equal(b, before[name]) {
				ops = append(ops, clientv3.OpPut(s.prefix+name, string(b)))
			}
		}
		if len(ops) == 0 {
			return d, nil
		}
		if len(ops) > pinsMaxServersPerUpdate {
			return nil, fmt.Errorf("pins: one update changes %d servers' pins; etcd writes at most %d at once",
				len(ops), pinsMaxServersPerUpdate)
		}
		resp, err := s.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(s.prefix).WithPrefix(), "<", rev+1)).
			Then(ops...).Commit()
		if err != nil {
			return nil, fmt.Errorf("pins: etcd: %w", err)
		}
		if resp.Succeeded {
			return d, nil
		}
		// Another node wrote pins since the read: apply the change to
		// what it wrote.
	}
}

// encodeAll is each server's value as Update would write it, to tell
// which servers a change touched.
func encodeAll(d *pins.Doc) (map[string][]byte, error) {
	out := make(map[string][]byte, len(d.Servers))
	for name, srv := range d.Servers {
		b, err := serverValue(name, srv)
		if err != nil {
			return nil, err
		}
		out[name] = b
	}
	return out, nil
}

// Watch calls changed after any node wrote pins, until ctx ends or the
// etcd client is closed (the node left). While etcd is away the client
// keeps the watch and resumes it where it was; when etcd ends a watch
// (its history was compacted past it), Watch watches again, after a pause
// that grows while that repeats, and calls changed, since writes may have
// been missed in between.
func (s *PinStore) Watch(ctx context.Context, changed func()) error {
	pause := pinsRetryPause
	for {
		wctx, cancel := context.WithCancel(ctx)
		for resp := range s.cli.Watch(wctx, s.prefix, clientv3.WithPrefix()) {
			if resp.Err() != nil {
				break
			}
			if len(resp.Events) > 0 {
				pause = pinsRetryPause
				changed()
			}
		}
		cancel()
		if ctx.Err() != nil {
			return nil
		}
		if err := s.cli.Ctx().Err(); err != nil {
			return errors.New("pins: the etcd client was closed")
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		pause = min(2*pause, pinsMaxRetryPause)
		changed()
	}
}
