package observe

import "troupe/actors"

// TenantView is s as a tenant may see it: who's own sessions, calls in
// flight and audit entries (who is identity.Identity.String, as the
// snapshot names identities), and nothing that tells about the others or
// about the server as a whole. Gone are the downstream servers and their held tools, the cluster
// and its members, the trend history and every total over all tenants;
// the metrics tiles count who's own sessions, calls in flight and calls
// waiting for approval, and the rest read zero (SpoolBytes -1, "not
// reported"). Viewer is set to who, so the page knows it shows one tenant.
// It is the one place the status page's tenant filter lives: mcphttp
// decides who is a tenant, package status applies this.
func TenantView(s Snapshot, who string) Snapshot {
	t := Snapshot{
		Version:              s.Version,
		Time:                 s.Time,
		UptimeSeconds:        s.UptimeSeconds,
		Sessions:             []SessionInfo{},
		Calls:                []CallInfo{},
		Downstreams:          []DownstreamStatus{},
		Audit:                []AuditEntry{},
		History:              []HistoryPoint{},
		Held:                 []HeldInfo{},
		HistoryPeriodSeconds: s.HistoryPeriodSeconds,
		Metrics:              MetricsSummary{SpoolBytes: -1},
		Viewer:               who,
	}
	for _, v := range s.Sessions {
		if v.Identity == who {
			v.Owner = "" // a cluster member's id is the server's, not the tenant's
			t.Sessions = append(t.Sessions, v)
		}
	}
	for _, c := range s.Calls {
		if c.Identity == who {
			t.Calls = append(t.Calls, c)
			if c.State == string(actors.CallWaitingApproval) {
				t.Metrics.ApprovalsPending++
			}
		}
	}
	for _, a := range s.Audit {
		if a.Identity == who {
			t.Audit = append(t.Audit, a)
		}
	}
	t.Metrics.Sessions = len(t.Sessions)
	t.Metrics.CallsInFlight = len(t.Calls)
	return t
}
