package sandbox

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// Network and IPC namespaces made ahead of time.
//
// A run without network gets a network namespace of its own (and, with
// it, an IPC namespace). Making a network namespace costs the kernel about
// 0.4 ms (every network subsystem sets up its per-namespace state), and as
// clone flags of the helper that cost lies on every run's path. A server
// running as root therefore makes them beforehand, after a run is
// released: a goroutine locks itself to a thread, unshares both
// namespaces there, opens them and returns the thread to the namespaces
// it came from. The next run's helper joins them (setns, before it drops
// its capabilities) instead of its clone making new ones. This pays when
// calls have a moment between them, as a client's calls do; calls sent
// back to back on a two-core machine gain nothing, since making the next
// pair then competes with the next call for the cores.
//
// Each pair is used by one run only: taken out of the pool, passed to one
// helper, closed by the server once the helper has started, never handed
// out again. No process has been in the namespaces before the run's own:
// they are exactly as fresh as clone(CLONE_NEWNET|CLONE_NEWIPC) would make
// them (a loopback that is down, no System V IPC objects), so no run can
// see or leave anything for another. When the pool is empty, the run's
// clone makes them as before. A non-root server's runs make theirs inside
// a user namespace of their own, which a namespace made here would not
// belong to, so only root uses the pool.

// nsPoolSize is how many pairs wait at most: enough for runs that start
// back to back (the next pair is made while a run goes on) without
// holding many namespaces for a server that runs nothing.
const nsPoolSize = 2

// nsPool holds namespace pairs ready for runs. The zero value is unusable;
// see newNSPool.
type nsPool struct {
	log   *slog.Logger
	ready chan nsPair
	// making counts the goroutines making a pair, so that at most
	// nsPoolSize pairs exist or are under way.
	making atomic.Int32
	// broken is set once making a pair failed: the kernel or a security
	// module refuses, and runs make their namespaces by clone again.
	broken atomic.Bool
	// mu orders starting refills before drain's wait for them.
	mu      sync.Mutex
	drained bool // no more refills: set by drain, under mu
	// refills are the goroutines making pairs; each ends by itself, and
	// wait waits for them.
	refills sync.WaitGroup
}

// nsPair is one unused network namespace and one unused IPC namespace.
type nsPair struct {
	net, ipc *os.File
}

func (p nsPair) close() {
	p.net.Close()
	p.ipc.Close()
}

func newNSPool(log *slog.Logger) *nsPool {
	return &nsPool{log: log, ready: make(chan nsPair, nsPoolSize)}
}

// take returns a pair if one is ready. If none is, it starts making one
// for the next run. The pool starts empty, so a server that never runs a
// confined program makes no namespaces.
//
// A pair taken is replaced when its run is released (Process.Release
// calls refill), not now: making one is CPU work that would compete with
// the run's own start on a small machine, while after the run the server
// is only answering.
func (p *nsPool) take() (nsPair, bool) {
	select {
	case ns := <-p.ready:
		return ns, true
	default:
		p.refill()
		return nsPair{}, false
	}
}

// refill starts making a pair unless the pool is full (counting those
// under way), broken or drained.
func (p *nsPool) refill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drained || p.broken.Load() {
		return
	}
	if int(p.making.Add(1))+len(p.ready) > nsPoolSize {
		p.making.Add(-1)
		return
	}
	p.refills.Go(func() { // ends by itself: one unshare and two opens
		defer p.making.Add(-1)
		ns, err := makeNamespaces()
		if err != nil {
			if !p.broken.Swap(true) {
				p.log.Info("sandbox: cannot make namespaces ahead of runs; each run makes its own", "err", err)
			}
			return
		}
		select {
		case p.ready <- ns:
		default: // full after all
			ns.close()
		}
	})
}

// wait waits until no pair is being made.
func (p *nsPool) wait() { p.refills.Wait() }

// drain closes the pairs that are ready; the Sandbox holding the pool
// calls it when it becomes unreachable (runtime.AddCleanup in New), so a
// server that replaces its Sandbox keeps no namespaces for nothing.
func (p *nsPool) drain() {
	p.mu.Lock()
	p.drained = true
	p.mu.Unlock()
	p.wait()
	for {
		select {
		case ns := <-p.ready:
			ns.close()
		default:
			return
		}
	}
}

// makeNamespaces makes a network and an IPC namespace on a thread locked
// for the purpose, opens them, and puts the thread back into the
// namespaces it came from before giving it back to the runtime.
//
// The thread must not simply end instead: a helper's parent-death signal
// belongs to the thread that forked it, which may be this one (it ran
// other goroutines before). Only if the way back fails does the thread
// end, with the goroutine still locked to it.
func makeNamespaces() (nsPair, error) {
	type result struct {
		ns  nsPair
		err error
	}
	done := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		ns, restored, err := unshareNamespaces()
		if restored {
			runtime.UnlockOSThread()
		}
		done <- result{ns, err}
	}()
	r := <-done
	return r.ns, r.err
}

// unshareNamespaces does makeNamespaces' work on the locked calling
// thread; restored says the thread is back in its own namespaces.
func unshareNamespaces() (ns nsPair, restored bool, err error) {
	var orig nsPair
	if orig.net, err = openNS("net"); err != nil {
		return nsPair{}, true, err
	}
	defer orig.net.Close()
	if orig.ipc, err = openNS("ipc"); err != nil {
		return nsPair{}, true, err
	}
	defer orig.ipc.Close()
	if err := unix.Unshare(unix.CLONE_NEWNET | unix.CLONE_NEWIPC); err != nil {
		return nsPair{}, true, fmt.Errorf("unshare(CLONE_NEWNET|CLONE_NEWIPC): %w", err)
	}
	ns.net, err = openNS("net")
	if err == nil {
		if ns.ipc, err = openNS("ipc"); err != nil {
			ns.net.Close()
		}
	}
	back := errors.Join(
		unix.Setns(int(orig.net.Fd()), unix.CLONE_NEWNET),
		unix.Setns(int(orig.ipc.Fd()), unix.CLONE_NEWIPC))
	if back != nil {
		if err == nil {
			ns.close()
		}
		return nsPair{}, false, fmt.Errorf("return to the server's namespaces: %w", back)
	}
	if err != nil {
		return nsPair{}, true, err
	}
	return ns, true, nil
}

// openNS opens the calling thread's namespace of kind ("net", "ipc"),
// close-on-exec.
func openNS(kind string) (*os.File, error) {
	path := "/proc/thread-self/ns/" + kind
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// joinNamespaces is the helper's side: it moves the calling thread (the
// one that will exec the target) into the namespaces behind netFD and
// ipcFD and closes them. setns checks that each fd is a namespace of the
// named kind.
func joinNamespaces(netFD, ipcFD int) error {
	var errs []error
	for _, ns := range []struct {
		fd   int
		kind int
		name string
	}{{netFD, unix.CLONE_NEWNET, "network"}, {ipcFD, unix.CLONE_NEWIPC, "IPC"}} {
		if err := unix.Setns(ns.fd, ns.kind); err != nil {
			errs = append(errs, fmt.Errorf("join the run's %s namespace: %w", ns.name, err))
		}
		unix.Close(ns.fd)
	}
	return errors.Join(errs...)
}
