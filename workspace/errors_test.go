package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"troupe/tools"
)

// TestToolError: each failure becomes the kind the model can act on, in
// words for reading or for writing, quoting the client's path and never
// the host's; an unexpected failure stays a plain (internal) error.
func TestToolError(t *testing.T) {
	ws, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	_, escape := ws.Root().ReadFile("../x") // os.Root's own escape error, naming host paths
	hostPath := &fs.PathError{Op: "open", Path: ws.Dir() + "/a", Err: syscall.EACCES}
	for _, c := range []struct {
		access Access
		err    error
		kind   tools.Kind
		says   string
	}{
		{Read, ErrInvalidPath, tools.KindInvalidArgument, "NUL byte"},
		{Read, ErrOutside, tools.KindPermissionDenied, "only paths inside it can be used"},
		{Write, escape, tools.KindPermissionDenied, "only paths inside it can be written"},
		{Read, fs.ErrNotExist, tools.KindNotFound, "does not exist in the workspace"},
		{Write, fs.ErrNotExist, tools.KindNotFound, "a directory on its way does not exist"},
		{Read, syscall.ENOTDIR, tools.KindNotFound, "does not exist: one of its parents"},
		{Write, syscall.ENOTDIR, tools.KindNotFound, "cannot be written: one of its parents"},
		{Read, hostPath, tools.KindPermissionDenied, "cannot be read: permission denied"},
		{Write, hostPath, tools.KindPermissionDenied, "cannot be written: permission denied"},
		{Read, syscall.ELOOP, tools.KindInvalidArgument, "too many levels"},
		{Write, syscall.ENAMETOOLONG, tools.KindInvalidArgument, "too long"},
		{Read, syscall.ENXIO, tools.KindInvalidArgument, "not a regular file"},
		{Write, syscall.EISDIR, tools.KindInvalidArgument, "is a directory"},
		{Write, syscall.EROFS, tools.KindPermissionDenied, "read-only"},
		{Write, syscall.EDQUOT, tools.KindUnavailable, "no space left"},
	} {
		t.Run(fmt.Sprintf("%d %v", c.access, c.err), func(t *testing.T) {
			got, ok := tools.AsError(ToolError(c.access, "a", c.err))
			if !ok || got.Kind != c.kind || !strings.Contains(got.Message, `path "a" `) || !strings.Contains(got.Message, c.says) {
				t.Fatalf("got %v; want %s saying %q", got, c.kind, c.says)
			}
			if strings.Contains(got.Message, ws.Dir()) {
				t.Fatalf("the message names the host path: %s", got.Message)
			}
		})
	}
	// A failure nobody expects is internal: no tools.Error, the cause kept.
	for _, access := range []Access{Read, Write} {
		err := ToolError(access, "a", syscall.EIO)
		if _, ok := tools.AsError(err); ok || !errors.Is(err, syscall.EIO) {
			t.Errorf("EIO: %v; want a plain error wrapping it", err)
		}
	}
	// Reading a socket is refused as not a regular file; writing one is not
	// expected and stays internal.
	if _, ok := tools.AsError(ToolError(Write, "a", syscall.ENXIO)); ok {
		t.Error("ENXIO while writing became a tool error")
	}
}
