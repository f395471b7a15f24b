package repo_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"troupe/sandbox"
)

// TestMain lets this test binary be the sandbox helper too: the sandbox
// that confines rg re-executes it (see sandbox.HelperMain), as it does
// troupe's own binary, when the standalone helper cannot be built.
func TestMain(m *testing.M) {
	sandbox.RunHelperIfAsked() // the sandbox re-executes this binary as its helper
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		if helper.dir != "" {
			os.RemoveAll(helper.dir)
		}
		os.Exit(code)
	}))
}

// helper is the standalone sandbox helper (cmd/troupe-sandbox), built on
// first use, once per test binary. Every confined rg run starts a helper,
// and this test binary, under -race above all, takes several times longer
// to start than the static troupe-sandbox a server ships with.
var helper struct {
	once      sync.Once
	dir, path string
	err       error
}

// sandboxHelper is the helper's path, or "" (the test binary) when it
// cannot be built.
func sandboxHelper(t testing.TB) string {
	t.Helper()
	helper.once.Do(func() {
		helper.dir, helper.err = os.MkdirTemp("", "troupe-repo-test-")
		if helper.err != nil {
			return
		}
		path := filepath.Join(helper.dir, sandbox.HelperName)
		cmd := exec.Command("go", "build", "-o", path, "troupe/cmd/troupe-sandbox")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			helper.err = &buildError{err: err, out: string(out)}
			return
		}
		helper.path = path
	})
	if helper.err != nil {
		t.Logf("the test binary is the sandbox helper: %v", helper.err)
	}
	return helper.path
}

type buildError struct {
	err error
	out string
}

func (e *buildError) Error() string {
	return "go build troupe-sandbox: " + e.err.Error() + "\n" + e.out
}
