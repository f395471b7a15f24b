package gate_test

import (
	"strings"
	"testing"
	"time"

	"troupe/gate"
	"troupe/tools"
)

// unseen is a decline that came too soon for anyone to have read the form.
var unseen = gate.Refused{Ending: gate.EndDeclined, Waited: 4 * time.Millisecond}

// Each ending says what happened, once, and only a refusal that was not a
// person's choice carries advice on how to allow the tool (issue 24).
func TestRefusalSaysWhatHappened(t *testing.T) {
	spec := tools.Spec{Name: "stamp", Safety: tools.Safety{RequiresApproval: true}, Meta: map[string]any{tools.MetaSource: "config"}}
	late := 3 * time.Second
	for _, c := range []struct {
		name   string
		r      gate.Refused
		want   string
		advice bool
	}{
		{"chose deny", gate.Refused{Ending: gate.EndChoseDeny, Waited: late}, "the person at the client chose deny when asked to approve it.", false},
		{"declined", gate.Refused{Ending: gate.EndDeclined, Waited: late}, "the person at the client declined the approval request.", false},
		{"cancelled", gate.Refused{Ending: gate.EndCancelled, Waited: late}, "the person at the client dismissed the approval request", false},
		{"declined at once", unseen, "the client declined the approval request 4ms after it was sent, too soon for anyone to have read it", true},
		{"deny at once", gate.Refused{Ending: gate.EndChoseDeny, Waited: 100 * time.Microsecond}, "the client answered deny to the approval request less than 1ms after", true},
		{"expired", gate.Refused{Ending: gate.EndExpired}, "nobody answered the approval request within 5m0s.", true},
		{"unreadable", gate.Refused{Ending: gate.EndUnreadable, Detail: `unknown action "maybe"`}, `could not be read (unknown action "maybe")`, true},
		{"unavailable", gate.Refused{Ending: gate.EndUnavailable}, "this client cannot ask for it", true},
	} {
		msg := gate.Refusal(spec, c.r, gate.Policy{}).Message
		if !strings.HasPrefix(msg, "stamp was not run: ") || !strings.Contains(msg, c.want) {
			t.Errorf("%s: want %q in:\n%s", c.name, c.want, msg)
		}
		if got := strings.Contains(msg, "requires_approval = false"); got != c.advice {
			t.Errorf("%s: advice given %v, want %v:\n%s", c.name, got, c.advice, msg)
		}
		if got := strings.Contains(msg, "Codex exec"); got != c.r.Unseen() {
			t.Errorf("%s: blames the client %v, want %v:\n%s", c.name, got, c.r.Unseen(), msg)
		}
		if strings.Contains(msg, "was chose") {
			t.Errorf("%s: %s", c.name, msg)
		}
	}
}
