package loadgen

import "time"

// watcher reads a local server's CPU time and RSS around the measured
// phase. With no pid, or off Linux, it records nothing.
type watcher struct {
	pid  int
	ok   bool
	cpu0 time.Duration
	rss0 int64
}

func newWatcher(pid int) *watcher { return &watcher{pid: pid} }

func (w *watcher) start() {
	if w.pid <= 0 {
		return
	}
	cpu, err1 := procCPU(w.pid)
	rss, err2 := procRSS(w.pid)
	if err1 == nil && err2 == nil {
		w.ok, w.cpu0, w.rss0 = true, cpu, rss
	}
}

// stop fills rep.Server.
func (w *watcher) stop(rep *Report) {
	if !w.ok {
		return
	}
	cpu, err1 := procCPU(w.pid)
	rss, err2 := procRSS(w.pid)
	if err1 != nil || err2 != nil {
		return
	}
	rep.Server = &ServerStats{PID: w.pid, CPUMs: float64((cpu - w.cpu0).Microseconds()) / 1e3, RSSStart: w.rss0, RSSEnd: rss}
}
