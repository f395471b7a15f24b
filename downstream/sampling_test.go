package downstream_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"troupe/downstream"
)

// cannedSample is the client's answer to a sampling request in these
// tests.
const cannedSample = `{"role":"assistant","content":{"type":"text","text":"canned"},"model":"test-model","stopReason":"endTurn"}`

// sampler is an Observer whose Sample answers cannedSample and counts.
func sampler(n *atomic.Int32) downstream.Observer {
	return downstream.Observer{Sample: func(context.Context, json.RawMessage) (json.RawMessage, error) {
		n.Add(1)
		return json.RawMessage(cannedSample), nil
	}}
}

func TestSamplingIsRelayedOnlyWhenConfigured(t *testing.T) {
	var logs logBuffer
	off := dial(t, fakeConfig(t, "normal", &logs), downstream.Handlers{})
	if init := call(t, off, "initparams", "", downstream.Observer{}); strings.Contains(init, "sampling") {
		t.Errorf("sampling declared without sampling = true: %s", init)
	}
	var asked atomic.Int32
	got := call(t, off, "sample", "", sampler(&asked))
	if asked.Load() != 0 || !strings.Contains(got, `"code":-32601`) || !strings.Contains(got, "did not declare the sampling capability") {
		t.Errorf("without sampling = true: relayed %d times, the server got %s", asked.Load(), got)
	}
	if !strings.Contains(logs.String(), "sampling request refused: sampling is not enabled for this server") {
		t.Errorf("the refusal is not logged:\n%s", logs.String())
	}

	cfg := fakeConfig(t, "normal", &logs)
	cfg.Sampling = true
	on := dial(t, cfg, downstream.Handlers{})
	if init := call(t, on, "initparams", "", downstream.Observer{}); !strings.Contains(init, `"sampling":{}`) {
		t.Errorf("sampling not declared with sampling = true: %s", init)
	}
	if got := call(t, on, "sample", "", sampler(&asked)); got != "sampled "+cannedSample || asked.Load() != 1 {
		t.Errorf("relayed %d times, the server got %s", asked.Load(), got)
	}
	if !strings.Contains(logs.String(), "sampling request relayed to the calling client") {
		t.Errorf("the relay is not logged:\n%s", logs.String())
	}
	// A caller that cannot be asked: a clear error, nothing relayed.
	if got := call(t, on, "sample", "", downstream.Observer{}); !strings.Contains(got, "sampling refused: the calling client cannot be asked") {
		t.Errorf("without Sample the server got %s", got)
	}
}

// TestQuestionsAfterTheCallAreRefused: a question that arrives once its
// call has ended reaches nobody: elicitation is declined, sampling gets an
// error, and the ended call's observer hears neither.
func TestQuestionsAfterTheCallAreRefused(t *testing.T) {
	cfg := fakeConfig(t, "normal", nil)
	cfg.Sampling = true
	c := dial(t, cfg, downstream.Handlers{})
	var asked atomic.Int32
	obs := sampler(&asked)
	obs.Elicit = func(context.Context, json.RawMessage) (json.RawMessage, error) {
		asked.Add(1)
		return json.RawMessage(`{"action":"accept","content":{}}`), nil
	}
	if got := call(t, c, "late", "", obs); got != "answered" {
		t.Fatalf("late: %q", got)
	}
	var late string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		// Called only once both questions were answered (no call in
		// flight meanwhile: this call would be theirs by the stdio rule).
		if late = call(t, c, "late-answers", "", downstream.Observer{}); late != "" {
			break
		}
	}
	// A question that arrives while a late-answers call is in flight is
	// that call's by the stdio rule; its observer cannot be asked either:
	// refused all the same, with the other wording.
	elicit, sample, _ := strings.Cut(late, "|")
	refused := strings.Contains(sample, "the request belongs to no call in flight") ||
		strings.Contains(sample, "sampling refused: the calling client cannot be asked")
	if elicit != `{"action":"decline"}` || !refused || asked.Load() != 0 {
		t.Errorf("late questions: elicitation %s, sampling %s, relayed %d", elicit, sample, asked.Load())
	}
}

// TestSamplingInRounds: a caller that answers in rounds (2026-07-28) gets a
// legacy server's sampling request as an input_required round, and its
// answer goes back to the parked call.
func TestSamplingInRounds(t *testing.T) {
	cfg := fakeConfig(t, "normal", nil)
	cfg.Sampling = true
	c := dial(t, cfg, downstream.Handlers{})
	ctx := context.Background()
	_, err := c.CallTool(ctx, "sample", nil, downstream.Observer{Rounds: true})
	var ir *downstream.InputRequired
	if !errors.As(err, &ir) || !strings.Contains(string(ir.Requests["sampling"]), `"method":"sampling/createMessage"`) {
		t.Fatalf("want the parked sampling request, got %v", err)
	}
	res, err := c.CallTool(ctx, "sample", nil, downstream.Observer{Rounds: true, Resume: &downstream.Resume{State: ir.State,
		Responses: map[string]json.RawMessage{"sampling": json.RawMessage(cannedSample)}}})
	if err != nil || resultText(t, res) != "sampled "+cannedSample {
		t.Fatalf("resumed: %s %v", res, err)
	}
}

// TestRoundsCallerIsNotOfferedURLElicitation: URL-mode elicitation (its
// elicitationId, notifications/elicitation/complete) exists only in the
// session-based revisions, so a caller that answers in rounds is not
// offered it: the server's question is declined, no round is asked.
func TestRoundsCallerIsNotOfferedURLElicitation(t *testing.T) {
	c := dial(t, fakeConfig(t, "normal", nil), downstream.Handlers{})
	var completed atomic.Int32
	res, err := c.CallTool(context.Background(), "urlelicit", nil, downstream.Observer{Rounds: true,
		ElicitationComplete: func(json.RawMessage) { completed.Add(1) }})
	if err != nil || resultText(t, res) != `elicited {"action":"decline"}` || completed.Load() != 0 {
		t.Fatalf("urlelicit in rounds: %s %v (completions %d)", res, err, completed.Load())
	}
}
