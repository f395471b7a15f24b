package loadgen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Mode is what a run measures.
type Mode string

const (
	// ModeThroughput makes Options.Calls calls, Options.Concurrency at a
	// time, as fast as the server answers.
	ModeThroughput Mode = "throughput"
	// ModeSessions opens Options.Sessions idle HTTP sessions and reports
	// what each costs the server in memory.
	ModeSessions Mode = "sessions"
	// ModeSoak makes Options.Rate calls per second for Options.Duration
	// and reports how latency, errors and memory drift.
	ModeSoak Mode = "soak"
)

// Target is the server under load: a command to start and speak to on
// stdio, or the URL of a streamable-HTTP endpoint.
type Target struct {
	// Command is the stdio server's argv. It runs in its own process
	// group, killed at the end of the run.
	Command []string
	// Env is the command's environment (nil: ours).
	Env []string
	// URL is the HTTP endpoint (e.g. http://127.0.0.1:8080/mcp).
	URL string
	// URLs, instead of URL, are several HTTP endpoints of one service,
	// such as the nodes of a troupe cluster, so that it is load-tested as
	// a whole: sessions (and, for stateless calls, callers) are spread
	// over them round-robin, and Report.PerURL breaks the figures down by
	// URL. One entry behaves exactly as URL.
	URLs []string
	// BearerToken, when set, is sent as "Authorization: Bearer …".
	BearerToken string
}

func (t Target) String() string {
	if urls := t.urls(); len(urls) > 0 {
		return strings.Join(urls, ", ")
	}
	return "stdio: " + strings.Join(t.Command, " ")
}

// urls are the HTTP endpoints, URLs or URL; nil for a stdio target.
func (t Target) urls() []string {
	if len(t.URLs) > 0 {
		return t.URLs
	}
	if t.URL != "" {
		return []string{t.URL}
	}
	return nil
}

// Options configure a run. The zero value of a field means its default.
type Options struct {
	Target Target
	Mode   Mode // default ModeThroughput

	Calls       int             // ModeThroughput: calls to make (default 20000)
	Concurrency int             // calls in flight (default 1; 16 for soak and for opening sessions; at least 1 per URL)
	Sessions    int             // HTTP sessions the callers share, or to open in ModeSessions (default 1 per URL)
	Tool        string          // the tool to call (default "echo")
	Args        json.RawMessage // its arguments, a JSON object (default {"text":"hello"})

	// Stateless, with an HTTP target, makes the calls without a session:
	// the 2026-07-28 revision's (server/discover once, then each tools/call
	// on its own, carrying its version and capabilities in _meta and the
	// headers that revision requires), or, when the server does not know
	// server/discover, the 2025 revisions' stateless calls (tools/call
	// with neither a session id nor initialize). See openStateless.
	Stateless bool

	Rate     float64       // ModeSoak: calls per second (required)
	Duration time.Duration // ModeSoak: how long (required)
	Interval time.Duration // ModeSoak: the drift report's step (default Duration/10, at least 1 s)

	// PID is a local server process to watch (CPU, RSS) when the target is
	// an HTTP server. A stdio server is always watched.
	PID int

	Timeout     time.Duration // the whole run (default 5 min)
	CallTimeout time.Duration // one call (default 30 s); a handshake gets at least 10 s
	// RouteVia, when set, is the URL every call is POSTed to, while the
	// sessions are still initialized (and closed) at the target's URLs:
	// with a troupe cluster, a node that does not own the sessions, so
	// that each call is forwarded to its owner and the run measures what
	// the hop between nodes costs (compare a run without it). Throughput
	// and soak modes only; the report's per-URL rows stay by the URL
	// that owns each session.
	RouteVia string

	// ProtocolVersion is offered in initialize (default "2025-06-18"); with
	// Stateless, the version the calls speak (default "2026-07-28";
	// a 2025 revision skips server/discover and makes the 2025 stateless
	// calls).
	ProtocolVersion string

	// Progress, when set, receives a live progress line (carriage
	// returns, no newlines) four times a second: give it a terminal.
	Progress io.Writer
	// ServerStderr receives a stdio server's stderr (nil: discarded).
	ServerStderr io.Writer
}

func (o *Options) defaults() error {
	if o.Mode == "" {
		o.Mode = ModeThroughput
	}
	urls := o.Target.urls()
	// Every URL gets a session and a caller by default.
	perURL := max(1, len(urls))
	if o.Calls <= 0 {
		o.Calls = 20000
	}
	if o.Concurrency <= 0 {
		o.Concurrency = perURL
		if o.Mode != ModeThroughput {
			o.Concurrency = max(16, perURL)
		}
	}
	if o.Sessions <= 0 {
		o.Sessions = 1
		if !o.Stateless {
			o.Sessions = perURL
		}
	}
	if o.Tool == "" {
		o.Tool = "echo"
	}
	if len(o.Args) == 0 {
		o.Args = json.RawMessage(`{"text":"hello"}`)
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.CallTimeout <= 0 {
		o.CallTimeout = DefaultCallTimeout
	}
	if o.ProtocolVersion == "" {
		o.ProtocolVersion = "2025-06-18"
		if o.Stateless {
			o.ProtocolVersion = StatelessVersion
		}
	}
	switch {
	case o.Target.URL != "" && len(o.Target.URLs) > 0:
		return errors.New("give the HTTP endpoint as URL or as URLs, not both")
	case (len(urls) == 0) == (len(o.Target.Command) == 0):
		return errors.New("give exactly one target: a stdio command or an HTTP URL")
	case len(urls) > 0:
		if err := validURLs(urls); err != nil {
			return err
		}
	case o.Stateless:
		return errors.New("stateless calls need an HTTP target (stdio has no sessions to leave out)")
	}
	if o.Stateless && o.Sessions > 1 {
		return errors.New("stateless calls open no sessions: leave the session count out")
	}
	if o.RouteVia != "" {
		switch {
		case len(urls) == 0:
			return errors.New("routing calls via a URL needs sessions opened over HTTP: give --http")
		case o.Stateless:
			return errors.New("stateless calls have no session to route to its owner: leave --route-via out")
		case o.Mode == ModeSessions:
			return errors.New("sessions mode makes no calls to route: leave --route-via out")
		}
		if err := validURL(o.RouteVia); err != nil {
			return fmt.Errorf("route via: %w", err)
		}
	}
	if err := o.coverURLs(len(urls)); err != nil {
		return err
	}
	switch o.Mode {
	case ModeThroughput:
	case ModeSessions:
		if len(urls) == 0 {
			return errors.New("sessions mode needs an HTTP target (a stdio server has one session)")
		}
		if o.Stateless {
			return errors.New("sessions mode opens sessions: it cannot be stateless")
		}
	case ModeSoak:
		if o.Rate <= 0 || o.Duration <= 0 {
			return errors.New("soak mode needs a rate and a duration")
		}
		if o.Interval <= 0 {
			o.Interval = max(o.Duration/10, time.Second)
		}
	default:
		return fmt.Errorf("unknown mode %q (throughput, sessions or soak)", o.Mode)
	}
	return nil
}

// coverURLs checks that a run spread over n URLs reaches every one of
// them: a URL with no session or no caller would take no load, and the
// run would measure less of the cluster than it says.
func (o *Options) coverURLs(n int) error {
	if n < 2 {
		return nil
	}
	if !o.Stateless && o.Sessions < n {
		return fmt.Errorf("%d session(s) cannot reach %d URLs: give at least one session per URL", o.Sessions, n)
	}
	if o.Mode != ModeSessions && o.Concurrency < n {
		return fmt.Errorf("a concurrency of %d cannot reach %d URLs: give at least one caller per URL", o.Concurrency, n)
	}
	return nil
}

// Defaults of Options.Timeout and Options.CallTimeout.
const (
	DefaultTimeout     = 5 * time.Minute
	DefaultCallTimeout = 30 * time.Second
)

// Check reports whether the options make a run (a target, a mode and what
// the mode needs), without starting one.
func (o Options) Check() error { return o.defaults() }

func (o *Options) handshakeTimeout() time.Duration { return max(o.CallTimeout, 10*time.Second) }

// Run drives the target as opts say and reports what it measured. It
// returns an error when the run could not start (bad options, a server
// that does not start or refuses initialize); failures of single calls
// are counted in the report instead. Run is bounded by opts.Timeout and by
// ctx; when either ends early the report says so in Aborted.
func Run(ctx context.Context, opts Options) (*Report, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	tmpl, err := newCallTemplate(opts.Tool, opts.Args)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()
	rep := &Report{Mode: opts.Mode, Target: opts.Target.String(), Concurrency: opts.Concurrency,
		Sessions: opts.Sessions, Errors: map[string]int64{}}
	if opts.Mode != ModeSessions {
		rep.Tool = opts.Tool
	}

	pid := opts.PID
	var endpoints []endpoint
	if len(opts.Target.Command) > 0 {
		srv, err := startStdio(opts.Target.Command, opts.Target.Env, opts.ServerStderr)
		if err != nil {
			return nil, fmt.Errorf("starting the server: %w", err)
		}
		defer srv.close(2 * time.Second)
		took, err := srv.initialize(ctx, opts.ProtocolVersion, opts.handshakeTimeout())
		if err != nil {
			return nil, err
		}
		rep.StartupMs = float64(took.Microseconds()) / 1e3
		rep.Sessions = 1
		pid = srv.pid()
		endpoints = []endpoint{srv}
		// A server that dies ends the run at once.
		go func() {
			select {
			case <-srv.dead:
				cancel()
			case <-ctx.Done():
			}
		}()
	}

	var client *http.Client
	urls := opts.Target.urls()
	if len(urls) > 0 {
		client = newHTTPClient(opts.Concurrency + opts.Sessions)
		defer client.CloseIdleConnections()
	}

	watch := newWatcher(pid)
	if opts.Mode == ModeSessions {
		return runSessions(ctx, opts, rep, client, watch)
	}
	var sessions []*httpSession
	if client != nil && opts.Stateless {
		var meta string
		sessions, meta, err = openStatelessAll(ctx, opts, client)
		if err != nil {
			return nil, err
		}
		if meta != "" {
			tmpl = tmpl.withMeta(meta)
		}
		rep.Sessions, rep.Stateless = 0, sessions[0].version
	} else if client != nil {
		sessions, err = openSessions(ctx, opts, client, opts.Sessions)
		defer closeSessions(client, sessions)
		if err != nil {
			return nil, err
		}
		for _, s := range sessions {
			s.via = opts.RouteVia
		}
		rep.RouteVia = opts.RouteVia
	}
	for _, s := range sessions {
		endpoints = append(endpoints, s)
	}

	watch.start()
	began := time.Now()
	var samples []sample
	if opts.Mode == ModeSoak {
		samples, rep.Behind = soak(ctx, opts, tmpl, endpoints, rep, watch, began)
	} else {
		samples = throughput(ctx, opts, tmpl, endpoints, rep, began)
	}
	elapsed := time.Since(began)
	watch.stop(rep)
	if n := len(rep.Intervals); n > 0 && rep.Intervals[n-1].RSS == 0 && rep.Server != nil {
		rep.Intervals[n-1].RSS = rep.Server.RSSEnd // the ticker had no last tick
	}
	summarise(rep, samples, elapsed)
	if !opts.Stateless {
		countSessions(rep.PerURL, sessions)
	}
	if ctx.Err() != nil {
		rep.Aborted = abortReason(ctx, opts)
	}
	if rep.Server != nil && rep.Calls > 0 {
		rep.Server.CPUUsPerCall = rep.Server.CPUMs * 1e3 / float64(rep.Calls)
	}
	return rep, nil
}

func abortReason(ctx context.Context, opts Options) string {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return fmt.Sprintf("the overall timeout (%s) passed", opts.Timeout)
	}
	return "stopped early (cancelled, or the server exited)"
}

// summarise fills the call counts, errors and latency from the samples.
func summarise(rep *Report, samples []sample, elapsed time.Duration) {
	rep.Calls = int64(len(samples))
	for _, s := range samples {
		switch {
		case s.limited:
			rep.RateLimited++
		case !s.failed:
			rep.OK++
		}
	}
	rep.DurationMs = float64(elapsed.Microseconds()) / 1e3
	if elapsed > 0 {
		rep.CallsPerSec = float64(rep.Calls) / elapsed.Seconds()
	}
	rep.Latency = latency(samples)
}

// maxErrorTexts is how many different texts the report keeps of one kind
// of error: enough to tell one cause from several, and bounded however
// many calls fail.
const maxErrorTexts = 3

// errorTexts holds the first different texts of each kind of error.
type errorTexts map[string][]string

// add keeps the first line of text under kind when it is new and there
// is room, cut to maxErrorText characters. Only the first line: it says
// the cause, and later lines often carry what differs per call (troupe's
// correlation id), which would defeat the deduplication.
func (e *errorTexts) add(kind, text string) {
	text, _, _ = strings.Cut(strings.TrimSpace(text), "\n")
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	if r := []rune(text); len(r) > maxErrorText {
		text = string(r[:maxErrorText-1]) + "…"
	}
	if *e == nil {
		*e = errorTexts{}
	}
	if list := (*e)[kind]; len(list) < maxErrorTexts && !slices.Contains(list, text) {
		(*e)[kind] = append(list, text)
	}
}

// worker is one caller: it records its own samples and error counts, so
// callers share nothing but the work counter.
type worker struct {
	*caller
	ep      endpoint
	tmpl    callTemplate
	idBase  int64
	seq     int64
	began   time.Time
	samples []sample
	errors  map[string]int64
	texts   errorTexts
}

func (w *worker) call(ctx context.Context) {
	w.seq++
	id := w.idBase + w.seq
	w.buf = w.tmpl.append(w.buf[:0], id)
	t0 := time.Now()
	kind, text := w.ep.roundTrip(ctx, w.caller, id, w.buf)
	now := time.Now()
	s := sample{end: now.Sub(w.began), dur: now.Sub(t0), failed: kind != "" && kind != KindRateLimited,
		limited: kind == KindRateLimited}
	if kind == KindTimeout || kind == KindTransport {
		s.dur = -1
	}
	if kind != "" {
		if s.failed {
			w.errors[kind]++
		}
		w.texts.add(kind, text)
	}
	w.samples = append(w.samples, s)
}

// newWorkers makes n callers spread over the endpoints round-robin.
func newWorkers(n int, opts Options, tmpl callTemplate, eps []endpoint, began time.Time, capHint int) []*worker {
	ws := make([]*worker, n)
	for i := range ws {
		ws[i] = &worker{caller: newCaller(opts.CallTimeout), ep: eps[i%len(eps)], tmpl: tmpl,
			idBase: int64(i+1) << 32, began: began, samples: make([]sample, 0, capHint), errors: map[string]int64{}}
	}
	return ws
}

// collect merges the workers' samples and errors and, for a run spread
// over several URLs, fills rep.PerURL with each URL's calls.
func collect(ws []*worker, rep *Report, urls []string) []sample {
	rep.PerURL = perURLCalls(urls, ws)
	var all []sample
	for _, w := range ws {
		all = append(all, w.samples...)
		for k, v := range w.errors {
			rep.Errors[k] += v
		}
		for k, texts := range w.texts {
			for _, t := range texts {
				(*errorTexts)(&rep.ErrorTexts).add(k, t)
			}
		}
	}
	return all
}

// progress prints a live line until stop is closed.
func progress(out io.Writer, what string, done, failed *atomic.Int64, total int64, began time.Time, stop <-chan struct{}) {
	if out == nil {
		return
	}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			fmt.Fprint(out, "\r\033[K")
			return
		case <-t.C:
			el := time.Since(began).Seconds()
			n := done.Load()
			fmt.Fprintf(out, "\r\033[K%s: %d/%d  %.0f/s  errors %d", what, n, total, float64(n)/el, failed.Load())
		}
	}
}

func throughput(ctx context.Context, opts Options, tmpl callTemplate, eps []endpoint, rep *Report, began time.Time) []sample {
	ws := newWorkers(opts.Concurrency, opts, tmpl, eps, began, opts.Calls/opts.Concurrency+1)
	var remaining, done, failed atomic.Int64
	remaining.Store(int64(opts.Calls))
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Go(func() { progress(opts.Progress, "calls", &done, &failed, int64(opts.Calls), began, stop) })
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			for ctx.Err() == nil && remaining.Add(-1) >= 0 {
				w.call(ctx)
				done.Add(1)
				if w.samples[len(w.samples)-1].failed {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	close(stop)
	pwg.Wait()
	return collect(ws, rep, opts.Target.urls())
}
