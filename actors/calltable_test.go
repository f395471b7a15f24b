package actors

import (
	"encoding/json"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sourcegraph/jsonrpc2"

	"troupe/protocol"
)

func pid(id string) *actor.PID { return &actor.PID{Address: "nonhost", Id: id} }

// The call table files calls by id and by invoker, tells a running call
// from an answered one, lets a reused id replace an answered call without
// the old invoker's end removing the new one, keeps at most
// maxIdleInvokers idle, and forgets what it no longer runs.
func TestCallTable(t *testing.T) {
	var ct callTable
	one, two := jsonrpc2.ID{Num: 1}, jsonrpc2.ID{Num: 2}
	a, b := pid("a"), pid("b")
	ct.add(one, &inflight{pid: a, tool: "x"})
	if !ct.busy(one) || ct.busy(two) || ct.len() != 1 {
		t.Fatal("a new call is busy, an unknown id is not")
	}
	c, _ := ct.get(one)
	c.answered = true
	if ct.busy(one) {
		t.Fatal("an answered call is not busy: its id may be reused")
	}
	ct.add(one, &inflight{pid: b, tool: "y"}) // the id reused while a stops
	if _, _, ok := ct.invokerGone(a); ok {
		t.Fatal("the old invoker's end took the new call")
	}
	if id, c, ok := ct.runBy(b); !ok || id != one || c.tool != "y" {
		t.Fatalf("runBy(b) = %v %+v %v", id, c, ok)
	}
	ct.remove(one, b)
	if ct.len() != 0 || len(ct.byPID) != 0 {
		t.Fatalf("an emptied table still holds calls: %+v", ct)
	}
	for i := range maxIdleInvokers {
		if !ct.keepIdle(pid(string(rune('c' + i)))) {
			t.Fatalf("idle invoker %d refused", i)
		}
	}
	if ct.keepIdle(pid("z")) {
		t.Fatal("more than maxIdleInvokers kept")
	}
	gone := ct.idle[0]
	ct.invokerGone(gone)
	for range maxIdleInvokers - 1 {
		if p := ct.takeIdle(); p == nil || p.Equal(gone) {
			t.Fatalf("takeIdle gave %v", p)
		}
	}
	if ct.takeIdle() != nil {
		t.Fatal("takeIdle from an empty pool")
	}
}

// Client requests are numbered, matched to their askers, abandoned by
// reply channel and failed by call; none is answered twice.
func TestClientRequests(t *testing.T) {
	var r clientRequests
	call := jsonrpc2.ID{Num: 7}
	mine, other, third := make(chan clientReply, 1), make(chan clientReply, 1), make(chan clientReply, 1)
	id1 := r.add(mine, &call)
	id2 := r.add(other, nil)
	id3 := r.add(third, &call)
	if id1 == id2 || id2 == id3 {
		t.Fatal("ids repeat")
	}
	res := json.RawMessage(`{"action":"accept"}`)
	if !r.answer(&jsonrpc2.Response{ID: id1, Result: &res}) || string((<-mine).result) != `{"action":"accept"}` {
		t.Fatal("answer not delivered")
	}
	if r.answer(&jsonrpc2.Response{ID: id1, Result: &res}) {
		t.Fatal("a request answered twice")
	}
	if v, ok := r.abandon(other); !ok || v.id != id2 {
		t.Fatalf("abandon: %+v %v", v, ok)
	}
	voids := r.fail(&call, "the call ended")
	if len(voids) != 1 || voids[0].id != id3 || (<-third).err == nil {
		t.Fatalf("fail(call): %+v", voids)
	}
	if r.pending != nil || len(r.fail(nil, "end")) != 0 {
		t.Fatal("requests left behind")
	}
}

// Trust is per tool and per fingerprint.
func TestTrustList(t *testing.T) {
	var tl trustList
	if tl.fingerprint("x") != nil {
		t.Fatal("the zero list trusts")
	}
	tl.grant("x", [32]byte{1})
	if p := tl.fingerprint("x"); p == nil || *p != [32]byte{1} || tl.fingerprint("y") != nil {
		t.Fatal("grant")
	}
}

// The relay sends growing progress only, log messages at or above the
// level in force (a 2026-07-28 call's own, none without one), within the
// rate unless the tool paces itself.
func TestRelay(t *testing.T) {
	r := relay{level: protocol.LevelWarning, rate: 1}
	call := &inflight{token: json.RawMessage(`1`)}
	if !r.allowProgress(1, call) || r.allowProgress(1, call) || !r.allowProgress(2, call) {
		t.Fatal("progress must grow")
	}
	if r.allowProgress(3, &inflight{}) {
		t.Fatal("progress without a token")
	}
	info := &toolNotice{isLog: true, level: protocol.LevelInfo}
	errLine := &toolNotice{isLog: true, level: protocol.LevelError}
	if r.allowLog(info, call) {
		t.Fatal("info below warning sent")
	}
	sent := 0
	for range 10 {
		if r.allowLog(errLine, call) {
			sent++
		}
	}
	if sent != 2 { // the burst is twice the rate
		t.Fatalf("%d of 10 unpaced log lines sent at rate 1", sent)
	}
	if !r.allowLog(&toolNotice{isLog: true, level: protocol.LevelError, paced: true}, call) {
		t.Fatal("a paced line is not rate limited")
	}
	debug := protocol.LevelDebug
	stateless := &inflight{era: protocol.EraStateless, level: &debug}
	paced := &toolNotice{isLog: true, level: protocol.LevelDebug, paced: true}
	if !r.allowLog(paced, stateless) || r.allowLog(paced, &inflight{era: protocol.EraStateless}) {
		t.Fatal("a 2026-07-28 call's own level, or none")
	}
}
