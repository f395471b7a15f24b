package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"

	"troupe/protocol"
	"troupe/sandbox"
	"troupe/tools"
)

const (
	readFileDefaultBytes = 200000
	readFileMaxBytes     = 10000000
	// binarySniffBytes is how much of a file git looks at for a NUL byte
	// before calling it binary; readFile uses the same window.
	binarySniffBytes = 8000
)

// readFileTool is repo.readFile.
type readFileTool struct {
	ws *sandbox.Workspace
}

type readFileArgs struct {
	Path     *string  `json:"path"`
	MaxBytes *float64 `json:"maxBytes"`
}

// readFileResult is repo.readFile's structuredContent.
type readFileResult struct {
	Path      string `json:"path"`
	Content   string `json:"content"`
	Truncated bool   `json:"truncated"`
}

const readFileInputSchema = `{
  "type": "object",
  "properties": {
    "path": {
      "type": "string",
      "description": "File to read, relative to the workspace root. An absolute path is accepted if it lies inside the workspace."
    },
    "maxBytes": {
      "type": "integer",
      "minimum": 1,
      "maximum": 10000000,
      "default": 200000,
      "description": "Return at most this many bytes of the file, from its start."
    }
  },
  "required": ["path"],
  "additionalProperties": false
}`

const readFileOutputSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "The file's clean path relative to the workspace root."},
    "content": {"type": "string"},
    "truncated": {"type": "boolean"}
  },
  "required": ["path", "content", "truncated"],
  "additionalProperties": false
}`

// Spec describes repo.readFile.
func (t *readFileTool) Spec() tools.Spec {
	return tools.Spec{
		Name:  NameReadFile,
		Title: "Read file",
		Description: "Read a text file in the workspace. Returns its workspace-relative path and content. " +
			"At most maxBytes bytes are returned (default 200000, up to 10000000), from the start of the file; truncated tells whether the file is longer. " +
			"Truncation never splits a UTF-8 character, so content can be up to 3 bytes shorter than maxBytes. " +
			"Bytes that are not valid UTF-8 are replaced with U+FFFD. " +
			"Binary files (a NUL byte in the first 8000 bytes) are refused with an error giving their size. " +
			"Directories are refused (use repo.listDir), as are FIFOs, sockets and devices. " +
			"Paths are relative to the workspace root; paths outside it are refused. To find text across files, use repo.ripgrep.",
		InputSchema:  json.RawMessage(readFileInputSchema),
		OutputSchema: json.RawMessage(readFileOutputSchema),
		Annotations:  readOnly("Read file"),
	}
}

// Call reads the file. It reads at most max(maxBytes, 8000) plus a few
// bytes, whatever the file's size: enough to sniff for binary content, to
// know whether the file goes on past maxBytes and to see a whole UTF-8
// sequence at the cut.
func (t *readFileTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	var args readFileArgs
	call, err := decodePathCall(t.ws, NameReadFile, req.Arguments, &args, &args.Path, &args.MaxBytes,
		pathLimit{"maxBytes", readFileDefaultBytes, 1, readFileMaxBytes})
	if err != nil {
		return nil, err
	}
	arg, rel, limit := call.arg, call.rel, call.limit
	f, fi, err := openRegular(t.ws.Root(), rel)
	if errors.Is(err, errNotRegular) {
		if fi.IsDir() {
			return nil, tools.Errorf(tools.KindInvalidArgument, "path %q is a directory; use %s to list it", arg, NameListDir)
		}
		return nil, tools.Errorf(tools.KindInvalidArgument, "path %q is not a regular file (it is a FIFO, socket or device)", arg)
	}
	if err != nil {
		return nil, pathError(arg, err)
	}
	defer f.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	// One byte past the limit tells whether the file is longer; a few
	// more let the cut see a whole UTF-8 sequence at the boundary.
	want := int64(max(limit, binarySniffBytes) + 4)
	// fstat's size spares a 10 MB buffer for a small file; should the
	// file have grown since, the rest is read in a second go.
	buf := make([]byte, min(want, fi.Size()+5))
	n, err := io.ReadFull(f, buf)
	if err == nil && int64(n) < want {
		more := make([]byte, want-int64(n))
		var m int
		m, err = io.ReadFull(f, more)
		buf, n = append(buf, more[:m]...), n+m
	}
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, pathError(arg, err)
	}
	buf = buf[:n]
	if bytes.IndexByte(buf[:min(n, binarySniffBytes)], 0) >= 0 {
		return nil, tools.Errorf(tools.KindInvalidArgument,
			"path %q is a binary file (%d bytes; it has a NUL byte in its first %d bytes) and cannot be shown as text",
			arg, fi.Size(), binarySniffBytes)
	}
	truncated := n > limit
	if truncated {
		buf = buf[:tools.UTF8Cut(buf, limit)]
	}
	return tools.StructuredResult(readFileResult{Path: rel, Content: tools.ValidText(buf), Truncated: truncated})
}
