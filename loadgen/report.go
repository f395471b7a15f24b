package loadgen

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a run measured. Durations are in the unit their name
// says; figures that could not be measured are left out of the JSON.
type Report struct {
	Mode        Mode   `json:"mode"`
	Target      string `json:"target"`
	Tool        string `json:"tool,omitempty"`
	Concurrency int    `json:"concurrency"`
	Sessions    int    `json:"sessions"`
	// Stateless is, for calls made without a session, the protocol
	// version they spoke: StatelessVersion after server/discover, or the
	// 2025 revision of the stateless calls a server without
	// server/discover got.
	Stateless string `json:"stateless,omitempty"`
	// RouteVia is Options.RouteVia: the URL the calls were sent to, not
	// the one that owns their sessions.
	RouteVia string `json:"route_via,omitempty"`

	Calls  int64            `json:"calls"`  // calls that ended (answered or failed)
	OK     int64            `json:"ok"`     // calls answered with a successful result
	Errors map[string]int64 `json:"errors"` // failed calls by kind (KindIsError, "jsonrpc:<code>", KindTimeout, KindTransport)
	// RateLimited counts the calls the server refused over one of its
	// limits (KindRateLimited: JSON-RPC -31429 or HTTP 429): neither ok
	// nor errors, since a server that enforces its limits works.
	RateLimited int64 `json:"rate_limited"`
	// ErrorTexts are, by kind, the first different texts the failures
	// (and the rate-limited calls, under KindRateLimited) said (the
	// server's error message, the tool's text), at most three a kind, so a
	// run that failed says why.
	ErrorTexts  map[string][]string `json:"error_texts,omitempty"`
	DurationMs  float64             `json:"duration_ms"`
	CallsPerSec float64             `json:"calls_per_sec"`
	Latency     Latency             `json:"latency"` // of answered calls, errors included

	// StartupMs is, for a stdio server, the time from starting its process
	// to its answer to initialize.
	StartupMs float64 `json:"startup_ms,omitempty"`
	// Server is what the kernel says about the server process, when it is
	// local: a stdio child, or Options.PID.
	Server *ServerStats `json:"server,omitempty"`
	// SessionsOpened, SessionsPerSec and BytesPerSession are the results
	// of ModeSessions. BytesPerSession is the growth of the server's RSS
	// divided by the sessions opened (only with a local server).
	SessionsOpened  int     `json:"sessions_opened,omitempty"`
	SessionsPerSec  float64 `json:"sessions_per_sec,omitempty"`
	BytesPerSession int64   `json:"bytes_per_session,omitempty"`
	// Intervals is ModeSoak's drift: one entry per Options.Interval.
	Intervals []Interval `json:"intervals,omitempty"`
	// Behind counts ticks of ModeSoak's pacer that found every caller busy
	// (the server, or the concurrency, could not keep the rate).
	Behind int64 `json:"behind,omitempty"`
	// Aborted says why the run stopped early (the overall timeout, the
	// server exiting).
	Aborted string `json:"aborted,omitempty"`
	// PerURL is, for a run spread over several URLs (Target.URLs), each
	// URL's share, in the order the URLs were given; the figures above
	// are the totals.
	PerURL []URLReport `json:"per_url,omitempty"`
}

// URLReport is one URL's share of a run spread over several.
type URLReport struct {
	URL string `json:"url"`
	// Sessions is how many sessions were opened at this URL (none for
	// stateless calls).
	Sessions int `json:"sessions"`
	// Calls, OK and Errors count the calls this URL's sessions (or
	// stateless callers) made, answered with a result, and failed.
	// Sessions and callers are spread round-robin, but calls follow their
	// callers: a slower URL serves fewer of them.
	Calls       int64 `json:"calls,omitempty"`
	OK          int64 `json:"ok,omitempty"`
	Errors      int64 `json:"errors,omitempty"`
	RateLimited int64 `json:"rate_limited,omitempty"`
	// Latency is that of this URL's answered calls (absent in
	// ModeSessions, which makes none).
	Latency *Latency `json:"latency,omitempty"`
}

// perURLSessions is the empty per-URL breakdown of a run over urls: nil
// for one URL (or none), whose report stays as it always was.
func perURLSessions(urls []string) []URLReport {
	if len(urls) < 2 {
		return nil
	}
	out := make([]URLReport, len(urls))
	for i, u := range urls {
		out[i].URL = u
	}
	return out
}

// countSessions adds each session to its URL's entry of per.
func countSessions(per []URLReport, sessions []*httpSession) {
	for i := range per {
		for _, s := range sessions {
			if s.url == per[i].URL {
				per[i].Sessions++
			}
		}
	}
}

// perURLCalls is the per-URL breakdown of the workers' calls, each
// worker's samples counted under the URL of its endpoint (nil for one
// URL).
func perURLCalls(urls []string, ws []*worker) []URLReport {
	per := perURLSessions(urls)
	for i := range per {
		var samples []sample
		for _, w := range ws {
			if h, ok := w.ep.(*httpSession); ok && h.url == per[i].URL {
				samples = append(samples, w.samples...)
			}
		}
		for _, s := range samples {
			switch {
			case s.failed:
				per[i].Errors++
			case s.limited:
				per[i].RateLimited++
			default:
				per[i].OK++
			}
		}
		l := latency(samples)
		per[i].Calls, per[i].Latency = int64(len(samples)), &l
	}
	return per
}

// Latency is a distribution in microseconds.
type Latency struct {
	P50 float64 `json:"p50_us"`
	P90 float64 `json:"p90_us"`
	P99 float64 `json:"p99_us"`
	Max float64 `json:"max_us"`
}

// ServerStats describes the server process during the measured phase.
type ServerStats struct {
	PID int `json:"pid"`
	// CPUMs is the user+system CPU time the process used while the calls
	// ran (/proc/PID/stat, 10 ms resolution), CPUUsPerCall that divided by
	// the calls.
	CPUMs        float64 `json:"cpu_ms"`
	CPUUsPerCall float64 `json:"cpu_us_per_call,omitempty"`
	// RSSStart and RSSEnd are VmRSS before and after the measured phase.
	RSSStart int64 `json:"rss_start_bytes"`
	RSSEnd   int64 `json:"rss_end_bytes"`
}

// Interval is one slice of a soak run.
type Interval struct {
	StartS float64 `json:"start_s"`
	Calls  int64   `json:"calls"`
	Errors int64   `json:"errors"`
	// RateLimited counts the interval's calls refused over a limit.
	RateLimited int64   `json:"rate_limited,omitempty"`
	P50         float64 `json:"p50_us"`
	P99         float64 `json:"p99_us"`
	RSS         int64   `json:"rss_bytes,omitempty"` // at the interval's end
}

// sample is one call as a caller recorded it.
type sample struct {
	end    time.Duration // since the measured phase began
	dur    time.Duration // -1 when unanswered
	failed bool
	// limited: refused over a server's limit (KindRateLimited), which is
	// not a failure.
	limited bool
}

// latency summarises the answered calls among samples.
func latency(samples []sample) Latency {
	d := make([]time.Duration, 0, len(samples))
	for _, s := range samples {
		if s.dur >= 0 {
			d = append(d, s.dur)
		}
	}
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	at := func(q float64) float64 {
		i := int(q*float64(len(d))+0.5) - 1
		i = max(0, min(i, len(d)-1))
		return us(d[i])
	}
	return Latency{P50: at(0.50), P90: at(0.90), P99: at(0.99), Max: us(d[len(d)-1])}
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }

// WriteTable prints the report for people.
func (r *Report) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	row := func(k string, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t"+format+"\n", append([]any{k}, args...)...)
	}
	row("target", "%s", r.Target)
	row("mode", "%s", r.Mode)
	if r.Tool != "" {
		row("tool", "%s", r.Tool)
	}
	if r.Stateless != "" {
		row("concurrency", "%d, without a session (%s)", r.Concurrency, r.Stateless)
	} else {
		row("concurrency", "%d over %d session(s)", r.Concurrency, r.Sessions)
	}
	if r.RouteVia != "" {
		row("calls via", "%s (sessions opened at the target)", r.RouteVia)
	}
	if r.StartupMs > 0 {
		row("startup", "%.1f ms (process start to initialize answer)", r.StartupMs)
	}
	if r.Mode == ModeSessions {
		row("sessions opened", "%d in %.0f ms (%.0f/s)", r.SessionsOpened, r.DurationMs, r.SessionsPerSec)
		if r.BytesPerSession != 0 {
			row("bytes/session", "%d (RSS growth / sessions)", r.BytesPerSession)
		}
	} else {
		row("calls", "%d in %.0f ms (%d ok)", r.Calls, r.DurationMs, r.OK)
		row("calls/s", "%.0f", r.CallsPerSec)
		row("latency µs", "p50 %.0f  p90 %.0f  p99 %.0f  max %.0f", r.Latency.P50, r.Latency.P90, r.Latency.P99, r.Latency.Max)
	}
	if r.RateLimited > 0 {
		row("rate limited", "%d (refused over the server's limits: -31429 or HTTP 429; not errors)", r.RateLimited)
		for _, t := range r.ErrorTexts[KindRateLimited] {
			row("", "%s", t)
		}
	}
	if len(r.Errors) == 0 {
		row("errors", "none")
	} else {
		var parts []string
		for _, k := range slices.Sorted(maps.Keys(r.Errors)) {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.Errors[k]))
		}
		row("errors", "%s", strings.Join(parts, ", "))
		for _, k := range slices.Sorted(maps.Keys(r.ErrorTexts)) {
			if _, failed := r.Errors[k]; !failed {
				continue // the rate-limited calls' texts are above
			}
			for _, t := range r.ErrorTexts[k] {
				row("", "%s: %s", k, t)
			}
		}
	}
	if s := r.Server; s != nil {
		row("server pid", "%d", s.PID)
		if r.Mode != ModeSessions {
			row("server CPU", "%.0f ms (%.1f µs/call)", s.CPUMs, s.CPUUsPerCall)
		}
		row("server RSS", "%.1f MiB → %.1f MiB", mib(s.RSSStart), mib(s.RSSEnd))
	} else {
		row("server CPU, RSS", "n/a (not measured: give --pid of a local HTTP server)")
	}
	if r.Behind > 0 {
		row("behind", "%d ticks found every caller busy", r.Behind)
	}
	if r.Aborted != "" {
		row("aborted", "%s", r.Aborted)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(r.PerURL) > 0 {
		fmt.Fprintln(w)
		if err := r.writePerURL(w); err != nil {
			return err
		}
	}
	if len(r.Intervals) > 0 {
		fmt.Fprintln(w)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "start s\tcalls\terrors\tp50 µs\tp99 µs\tRSS MiB\t")
		for _, iv := range r.Intervals {
			rss := "n/a" // no process watched: nothing measured, not 0
			if r.Server != nil {
				rss = fmt.Sprintf("%.1f", mib(iv.RSS))
			}
			fmt.Fprintf(tw, "%.0f\t%d\t%d\t%.0f\t%.0f\t%s\t\n", iv.StartS, iv.Calls, iv.Errors, iv.P50, iv.P99, rss)
		}
		return tw.Flush()
	}
	return nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// writePerURL prints the share of each URL of a run spread over several:
// its sessions (none for stateless calls) and, when calls were made, their
// count, failures and latency percentiles.
func (r *Report) writePerURL(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	calls := r.Mode != ModeSessions
	head := "url"
	if r.Stateless == "" {
		head += "\tsessions"
	}
	if calls {
		head += "\tcalls\tok\terrors\tp50 µs\tp90 µs\tp99 µs\tmax µs"
	}
	fmt.Fprintln(tw, head)
	for _, u := range r.PerURL {
		line := u.URL
		if r.Stateless == "" {
			line += fmt.Sprintf("\t%d", u.Sessions)
		}
		if calls {
			var l Latency
			if u.Latency != nil {
				l = *u.Latency
			}
			line += fmt.Sprintf("\t%d\t%d\t%d\t%.0f\t%.0f\t%.0f\t%.0f", u.Calls, u.OK, u.Errors, l.P50, l.P90, l.P99, l.Max)
		}
		fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
