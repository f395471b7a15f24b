package loadgen

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// openSessions opens n HTTP sessions, opts.Concurrency at a time, the
// i-th at the i-th URL round-robin. On error it returns the sessions it
// did open (to be closed) and the first error.
func openSessions(ctx context.Context, opts Options, client *http.Client, n int, onOpen ...func()) ([]*httpSession, error) {
	urls := opts.Target.urls()
	out := make([]*httpSession, n)
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range min(opts.Concurrency, n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				url := urls[i%len(urls)]
				s, err := openHTTPSession(ctx, client, url, opts.Target.BearerToken, opts.ProtocolVersion, opts.handshakeTimeout())
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("session %d: %w", i+1, err)
						if len(urls) > 1 {
							firstErr = fmt.Errorf("session %d (%s): %w", i+1, url, err)
						}
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
				out[i] = s
				for _, f := range onOpen {
					f()
				}
			}
		})
	}
	wg.Wait()
	opened := out[:0]
	for _, s := range out {
		if s != nil {
			opened = append(opened, s)
		}
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return opened, firstErr
}

// closeSessions ends the sessions with DELETE, a few at a time, within
// ten seconds whatever the server does.
func closeSessions(client *http.Client, sessions []*httpSession) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	work := make(chan *httpSession)
	var wg sync.WaitGroup
	for range min(16, len(sessions)) {
		wg.Go(func() {
			for s := range work {
				s.close(ctx)
			}
		})
	}
	for _, s := range sessions {
		work <- s
	}
	close(work)
	wg.Wait()
}

// runSessions is ModeSessions: the server's RSS before and after opening
// opts.Sessions idle sessions.
func runSessions(ctx context.Context, opts Options, rep *Report, client *http.Client, watch *watcher) (*Report, error) {
	watch.start()
	began := time.Now()
	var done, failed atomic.Int64
	stop := make(chan struct{})
	var pwg sync.WaitGroup
	pwg.Go(func() { progress(opts.Progress, "sessions", &done, &failed, int64(opts.Sessions), began, stop) })
	sessions, err := openSessions(ctx, opts, client, opts.Sessions, func() { done.Add(1) })
	elapsed := time.Since(began)
	close(stop)
	pwg.Wait()
	defer closeSessions(client, sessions)
	if err != nil && len(sessions) == 0 {
		return nil, err
	}
	if err != nil {
		rep.Errors[KindTransport]++
		rep.Aborted = err.Error()
	}
	// Let the server settle (timers armed, buffers returned) before
	// reading its memory.
	select {
	case <-time.After(200 * time.Millisecond):
	case <-ctx.Done():
	}
	watch.stop(rep)
	rep.SessionsOpened = len(sessions)
	rep.PerURL = perURLSessions(opts.Target.urls())
	countSessions(rep.PerURL, sessions)
	rep.DurationMs = float64(elapsed.Microseconds()) / 1e3
	if elapsed > 0 {
		rep.SessionsPerSec = float64(len(sessions)) / elapsed.Seconds()
	}
	if rep.Server != nil && len(sessions) > 0 {
		rep.BytesPerSession = (rep.Server.RSSEnd - rep.Server.RSSStart) / int64(len(sessions))
	}
	return rep, nil
}
