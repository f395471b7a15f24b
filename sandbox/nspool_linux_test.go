package sandbox

import (
	"bufio"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
)

// TestRunsGetNamespacesOfTheirOwn: every run without network is in a
// network and an IPC namespace that no other run and not the server is
// in, whether the pool (root) made them ahead of time or the helper's
// clone made them, one run after another and side by side. The runs stay
// alive until all have answered: the kernel reuses a namespace's number
// once it is gone.
func TestRunsGetNamespacesOfTheirOwn(t *testing.T) {
	s := newSandbox(t, DriverBuiltin)
	ws, _ := workspace(t)
	p := policy(ProfileDefault, ws)
	requireEnforceable(t, s, p)
	if !s.iso.NetNS {
		t.Skip("no network namespaces here")
	}
	if os.Getuid() == 0 && s.ns == nil {
		t.Fatal("a root server with network namespaces should make them ahead of runs")
	}
	seen := map[string]string{}
	for _, ns := range namespacesOf(t, "/proc/self") {
		seen[ns] = "the server"
	}
	var mu sync.Mutex
	var runs []*nsRun
	defer func() {
		for _, r := range runs {
			r.end(t)
		}
	}()
	start := func(name string) {
		r, err := startNSRun(s, p)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		runs = append(runs, r)
		for _, ns := range r.namespaces {
			if prev, dup := seen[ns]; dup {
				t.Errorf("%s is in %s, as %s is", name, ns, prev)
			}
			seen[ns] = name
		}
	}
	for i := range 4 {
		if s.ns != nil {
			// Runs stay alive, so nothing refills the pool but a run
			// that finds it empty: every other run takes a pair.
			s.ns.wait()
		}
		start(fmt.Sprintf("run %d", i))
	}
	pooled := 0
	for _, r := range runs {
		if r.proc.ns != nil {
			pooled++
		}
	}
	if s.ns != nil && pooled != 2 {
		t.Errorf("%d of 4 runs joined namespaces from the pool, want 2", pooled)
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() { start(fmt.Sprintf("concurrent run %d", i)) })
	}
	wg.Wait()
	if len(seen) != 2+2*8 {
		t.Errorf("want 18 namespaces, saw %d: %v", len(seen), seen)
	}
}

// nsRun is a run that has said which namespaces it is in and waits for
// its stdin to end.
type nsRun struct {
	cmd        *exec.Cmd
	proc       *Process
	stdin      *os.File
	namespaces []string
}

func startNSRun(s *Sandbox, p Policy) (*nsRun, error) {
	inR, inW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer inR.Close()
	outR, outW, err := os.Pipe()
	if err != nil {
		inW.Close()
		return nil, err
	}
	defer outR.Close()
	cmd := exec.Command("/bin/sh", "-c", "readlink /proc/self/ns/net /proc/self/ns/ipc; read x; true")
	cmd.Env, cmd.Dir = testEnv, p.Workspace
	cmd.Stdin, cmd.Stdout = inR, outW
	proc, err := s.Start(p, cmd)
	outW.Close()
	if err != nil {
		inW.Close()
		return nil, fmt.Errorf("%w (%s)", err, stderrOf(err))
	}
	r := &nsRun{cmd: cmd, proc: proc, stdin: inW}
	sc := bufio.NewScanner(outR)
	for len(r.namespaces) < 2 && sc.Scan() {
		r.namespaces = append(r.namespaces, strings.TrimSpace(sc.Text()))
	}
	if len(r.namespaces) < 2 {
		r.stdin.Close()
		_ = cmd.Wait()
		_ = proc.Release()
		return nil, fmt.Errorf("the run said %q", r.namespaces)
	}
	return r, nil
}

func (r *nsRun) end(t *testing.T) {
	r.stdin.Close()
	if err := r.cmd.Wait(); err != nil {
		t.Errorf("run: %v", err)
	}
	if err := r.proc.Release(); err != nil {
		t.Errorf("Release: %v", err)
	}
}

// namespacesOf is the network and IPC namespaces of the process at proc
// ("/proc/self"), as readlink shows them.
func namespacesOf(t *testing.T, proc string) []string {
	t.Helper()
	var out []string
	for _, kind := range []string{"net", "ipc"} {
		link, err := os.Readlink(proc + "/ns/" + kind)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, link)
	}
	return out
}

// TestNSPoolDrain: a drained pool closes what it holds and makes no more.
func TestNSPoolDrain(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("only root makes namespaces ahead of runs")
	}
	p := newNSPool(slog.New(slog.DiscardHandler))
	if _, ok := p.take(); ok {
		t.Fatal("a new pool is empty")
	}
	p.wait()
	if p.broken.Load() || len(p.ready) != 1 {
		t.Fatalf("after a take from the empty pool: %d ready, broken %v", len(p.ready), p.broken.Load())
	}
	ns := <-p.ready
	p.ready <- ns
	p.drain()
	if len(p.ready) != 0 {
		t.Fatalf("%d pairs left after drain", len(p.ready))
	}
	if _, err := ns.net.Stat(); err == nil {
		t.Error("drain left a namespace open")
	}
	p.refill()
	p.wait()
	if len(p.ready) != 0 {
		t.Error("a drained pool made namespaces")
	}
}
