package app

import (
	"fmt"
	"log/slog"

	"troupe/config"
	"troupe/gate/approvalstate"
)

// newApprovalStates makes the Sealer for the requestState of approvals in
// the stateless revision from [approvals]: state_key, the
// previous_state_keys that still open older states, approvals.timeout as
// their lifetime and max_states_per_caller as each caller's share of them. Without a state_key the key is generated for this
// process, and troupe says so at debug: a state then opens only in the
// process that issued it, so several processes behind one endpoint need a
// shared key. Most servers are one process, for whom an info line on every
// start would be noise (issue 24); README's HTTP section says when to set
// the key.
func newApprovalStates(cfg *config.Config, log *slog.Logger) (*approvalstate.Sealer, error) {
	a := cfg.Approvals
	opts := approvalstate.Options{TTL: a.Timeout, MaxPerCaller: a.MaxStatesPerCaller}
	if a.StateKey == "" {
		opts.Key = approvalstate.NewKey()
		log.Debug("approvals.state_key is not set: approval states (stateless clients) are sealed " +
			"under a key generated for this process; several troupe processes serving one endpoint need a shared approvals.state_key")
	} else {
		var err error
		if opts.Key, err = approvalstate.ParseKey(a.StateKey); err != nil {
			return nil, fmt.Errorf("approvals.state_key %w", err)
		}
	}
	for i, k := range a.PreviousStateKeys {
		key, err := approvalstate.ParseKey(k)
		if err != nil {
			return nil, fmt.Errorf("approvals.previous_state_keys[%d] %w", i, err)
		}
		opts.Previous = append(opts.Previous, key)
	}
	return approvalstate.New(opts)
}
