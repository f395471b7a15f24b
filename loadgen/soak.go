package loadgen

import (
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"
)

// soak is ModeSoak: a pacer hands out opts.Rate tokens a second for
// opts.Duration; opts.Concurrency callers take them. A token that finds
// every caller busy is not queued but counted in behind, so that a slow
// server shows as missed rate rather than as a growing backlog.
func soak(ctx context.Context, opts Options, tmpl callTemplate, eps []endpoint, rep *Report, watch *watcher, began time.Time) ([]sample, int64) {
	total := int64(opts.Rate * opts.Duration.Seconds())
	ws := newWorkers(opts.Concurrency, opts, tmpl, eps, began, int(total)/opts.Concurrency+1)
	tokens := make(chan struct{}, opts.Concurrency)
	var done, failed atomic.Int64
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Go(func() { soakProgress(opts.Progress, &done, &failed, total, opts.Duration, began, stop) })

	// RSS at each interval's end.
	var rss []int64
	if watch.pid > 0 {
		bg.Go(func() {
			t := time.NewTicker(opts.Interval)
			defer t.Stop()
			for {
				select {
				case <-stop:
					return
				case <-t.C:
					if v, err := procRSS(watch.pid); err == nil {
						rss = append(rss, v)
					}
				}
			}
		})
	}

	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			for range tokens {
				w.call(ctx)
				done.Add(1)
				if w.samples[len(w.samples)-1].failed {
					failed.Add(1)
				}
			}
		})
	}
	var behind int64
	step := time.Duration(float64(time.Second) / opts.Rate)
pace:
	for k := range total {
		if wait := time.Until(began.Add(time.Duration(k) * step)); wait > 0 {
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				break pace
			}
		}
		select {
		case tokens <- struct{}{}:
		default:
			behind++
		}
	}
	close(tokens)
	wg.Wait()
	close(stop)
	bg.Wait()
	samples := collect(ws, rep, opts.Target.urls())
	rep.Intervals = intervals(samples, opts.Interval, rss)
	return samples, behind
}

// intervals slices the samples by their end time.
func intervals(samples []sample, step time.Duration, rss []int64) []Interval {
	var buckets [][]sample
	for _, s := range samples {
		i := int(s.end / step)
		for len(buckets) <= i {
			buckets = append(buckets, nil)
		}
		buckets[i] = append(buckets[i], s)
	}
	out := make([]Interval, len(buckets))
	for i, b := range buckets {
		l := latency(b)
		iv := Interval{StartS: (time.Duration(i) * step).Seconds(), Calls: int64(len(b)), P50: l.P50, P99: l.P99}
		for _, s := range b {
			if s.failed {
				iv.Errors++
			}
			if s.limited {
				iv.RateLimited++
			}
		}
		if i < len(rss) {
			iv.RSS = rss[i]
		}
		out[i] = iv
	}
	return out
}

// soakProgress keeps a live line on out (a terminal) while a soak runs:
// how far into the duration it is, calls done of those planned, the rate
// reached and the errors so far; the line is cleared at the end. A soak
// runs for minutes, so the time left matters more than the count.
func soakProgress(out io.Writer, done, failed *atomic.Int64, total int64, dur time.Duration, began time.Time, stop <-chan struct{}) {
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
			el := time.Since(began)
			n := done.Load()
			fmt.Fprintf(out, "\r\033[Ksoak: %s of %s  calls %d/%d  %.0f/s  errors %d",
				min(el, dur).Truncate(time.Second), dur, n, total, float64(n)/el.Seconds(), failed.Load())
		}
	}
}
