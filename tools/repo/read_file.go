package repo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"unicode/utf8"

	"troupe/protocol"
	"troupe/tools"
	"troupe/workspace"
)

const (
	// readFileDefaultBytes keeps a default read, JSON-encoded with its
	// range fields, under the ~12,000 bytes Codex shows of a tool result:
	// a larger one would lose its middle there, unseen by the model.
	readFileDefaultBytes = 8192
	readFileMaxBytes     = 10000000
	// binarySniffBytes is how much of a file git looks at for a NUL byte
	// before calling it binary; readFile uses the same window.
	binarySniffBytes = 8000
	// readFileMaxOffset and readFileMaxLine bound the range arguments to
	// integers a JSON number holds exactly.
	readFileMaxOffset = 1 << 50
	readFileMaxLine   = 1 << 40
	// lineScanBytes is how much of the file one step of the search for a
	// line's start reads.
	lineScanBytes = 64 << 10
)

// readFileTool is repo.readFile.
type readFileTool struct {
	ws *workspace.Root
}

type readFileArgs struct {
	Path      *string  `json:"path"`
	MaxBytes  *float64 `json:"maxBytes"`
	Offset    *float64 `json:"offset"`
	StartLine *float64 `json:"startLine"`
	EndLine   *float64 `json:"endLine"`
}

// readFileResult is repo.readFile's structuredContent. The range fields
// come before the content, so a client that cuts a long result in the
// middle still shows them.
type readFileResult struct {
	Path       string `json:"path"`
	Size       int64  `json:"size"`
	Offset     int64  `json:"offset"`
	StartLine  int64  `json:"startLine,omitempty"`
	EndLine    int64  `json:"endLine,omitempty"`
	Truncated  bool   `json:"truncated"`
	NextOffset *int64 `json:"nextOffset,omitempty"`
	NextLine   int64  `json:"nextLine,omitempty"`
	Content    string `json:"content"`
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
      "default": 8192,
      "description": "Return at most this many bytes (default 8192, at most 10000000)."
    },
    "offset": {
      "type": "integer",
      "minimum": 0,
      "description": "Start at this byte of the file (default 0), e.g. a previous result's nextOffset. Not with startLine/endLine."
    },
    "startLine": {
      "type": "integer",
      "minimum": 1,
      "description": "Start at this line (1-based), e.g. a previous result's nextLine or a line repo.ripgrep found. Not with offset."
    },
    "endLine": {
      "type": "integer",
      "minimum": 1,
      "description": "End with this line (inclusive; from line 1 when startLine is not given), unless maxBytes ends the content first. Not with offset."
    }
  },
  "required": ["path"],
  "additionalProperties": false
}`

const readFileOutputSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "The file's clean path relative to the workspace root."},
    "size": {"type": "integer", "description": "The file's size in bytes."},
    "offset": {"type": "integer", "description": "The byte of the file content starts at."},
    "startLine": {"type": "integer", "description": "For a read by lines: the line content starts with."},
    "endLine": {"type": "integer", "description": "For a read by lines: the last line content holds (whole, unless a single line is longer than maxBytes)."},
    "truncated": {"type": "boolean", "description": "maxBytes ended content before what was asked (the rest of the file, or endLine)."},
    "nextOffset": {"type": "integer", "description": "Where the file goes on after content: pass it as offset to read on. Absent at the end of the file."},
    "nextLine": {"type": "integer", "description": "For a read by lines that ended with a whole line: pass it as startLine to read on."},
    "content": {"type": "string"}
  },
  "required": ["path", "size", "offset", "truncated", "content"],
  "additionalProperties": false
}`

// Spec describes repo.readFile.
func (t *readFileTool) Spec() tools.Spec {
	return tools.Spec{
		Name:  NameReadFile,
		Title: "Read file",
		Description: "Read a text file in the workspace, whole or a range of it. Returns its workspace-relative path, size, " +
			"the range returned and content. At most maxBytes bytes are returned (default 8192, up to 10000000); " +
			"truncated tells whether maxBytes cut the content short, and nextOffset (and, reading by lines, nextLine) " +
			"says where to go on. Read a range by bytes with offset, or by lines with startLine and/or endLine (1-based, " +
			"inclusive; a cut by maxBytes ends at a whole line when one fits). " +
			"Cuts never split a UTF-8 character, so content can be up to 3 bytes shorter than maxBytes, and an offset " +
			"inside a character starts after it. Bytes that are not valid UTF-8 are replaced with U+FFFD. " +
			"Binary files (a NUL byte in the first 8000 bytes) are refused with an error giving their size. " +
			"Directories are refused (use repo.listDir), as are FIFOs, sockets and devices. " +
			"Paths are relative to the workspace root; paths outside it are refused. To find text across files, use repo.ripgrep.",
		InputSchema:  json.RawMessage(readFileInputSchema),
		SchemasFixed: true, // constants; CheckSchemas in the tests
		OutputSchema: json.RawMessage(readFileOutputSchema),
		Annotations:  readOnly("Read file"),
	}
}

// readRange is a decoded range request: by bytes from offset, or by lines
// from startLine to endLine (0: to the end).
type readRange struct {
	byLines            bool
	offset             int64
	startLine, endLine int64
}

// decodeRange checks the range arguments: offset, or startLine/endLine,
// not both, and endLine not before startLine.
func decodeRange(a *readFileArgs) (readRange, error) {
	if a.Offset != nil && (a.StartLine != nil || a.EndLine != nil) {
		return readRange{}, tools.Errorf(tools.KindInvalidArgument,
			"give either offset (a range by bytes) or startLine/endLine (a range by lines), not both")
	}
	if a.Offset != nil {
		off, err := tools.IntArg("offset", a.Offset, 0, 0, readFileMaxOffset)
		return readRange{offset: int64(off)}, err
	}
	if a.StartLine == nil && a.EndLine == nil {
		return readRange{}, nil
	}
	start, err := tools.IntArg("startLine", a.StartLine, 1, 1, readFileMaxLine)
	if err != nil {
		return readRange{}, err
	}
	end, err := tools.IntArg("endLine", a.EndLine, 0, 1, readFileMaxLine)
	if err != nil {
		return readRange{}, err
	}
	if a.EndLine != nil && end < start {
		return readRange{}, tools.Errorf(tools.KindInvalidArgument,
			"endLine %d is before startLine %d; endLine is inclusive, so a single line is startLine = endLine", end, start)
	}
	return readRange{byLines: true, startLine: int64(start), endLine: int64(end)}, nil
}

// Call reads the file, or the range asked for. It reads the first 8000
// bytes (binary sniff), at most maxBytes plus a few bytes of the range
// (enough to know whether the file goes on and to see whole UTF-8
// sequences at the cuts) and, for a range by lines, the file up to the
// start line: never the whole of a large file for a small range.
func (t *readFileTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	var args readFileArgs
	call, err := decodePathCall(t.ws, NameReadFile, req.Arguments, &args, &args.Path, &args.MaxBytes,
		pathLimit{"maxBytes", readFileDefaultBytes, 1, readFileMaxBytes})
	if err != nil {
		return nil, err
	}
	rng, err := decodeRange(&args)
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
		return nil, workspace.ToolError(workspace.Read, arg, err)
	}
	defer f.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	sniff, err := readAt(f, 0, binarySniffBytes)
	if err != nil {
		return nil, workspace.ToolError(workspace.Read, arg, err)
	}
	if bytes.IndexByte(sniff, 0) >= 0 {
		return nil, tools.Errorf(tools.KindInvalidArgument,
			"path %q is a binary file (%d bytes; it has a NUL byte in its first %d bytes) and cannot be shown as text",
			arg, fi.Size(), binarySniffBytes)
	}

	res := readFileResult{Path: rel, Size: fi.Size()}
	start := rng.offset
	if rng.byLines {
		lines, at, found, err := lineStart(ctx, f, rng.startLine)
		if err != nil {
			return nil, workspace.ToolError(workspace.Read, arg, err)
		}
		if !found {
			return nil, tools.Errorf(tools.KindInvalidArgument,
				"startLine %d is past the end of %q: it has %d lines", rng.startLine, arg, lines)
		}
		start, res.StartLine = at, rng.startLine
	} else if start > fi.Size() {
		return nil, tools.Errorf(tools.KindInvalidArgument,
			"offset %d is past the end of %q: it has %d bytes", start, arg, fi.Size())
	}

	// From up to 3 bytes before the start (to see a character the offset
	// falls into) to a few bytes past the limit (to see whether the file
	// goes on, and a whole character at the cut).
	// fstat's size spares a 10 MB buffer for a small file.
	lead := min(start, utf8.UTFMax-1)
	want := min(lead+int64(limit), fi.Size()-(start-lead)) + utf8.UTFMax + 1
	buf, err := readAt(f, start-lead, int(want))
	if err != nil {
		return nil, workspace.ToolError(workspace.Read, arg, err)
	}
	skip := intoRune(buf, int(lead))
	buf = buf[int(lead)+skip:]
	res.Offset = start + int64(skip)

	n := len(buf) // what the range asks for, as far as read
	if rng.byLines && rng.endLine > 0 {
		n = linesEnd(buf, rng.endLine-rng.startLine+1)
	}
	if n > limit {
		res.Truncated = true
		n = tools.UTF8Cut(buf, limit)
		if rng.byLines {
			if nl := bytes.LastIndexByte(buf[:limit], '\n'); nl >= 0 {
				n = nl + 1 // a whole line fits: end with it
			}
		}
	}
	content := buf[:n]
	if n < len(buf) {
		next := res.Offset + int64(n)
		res.NextOffset = &next
	}
	if rng.byLines {
		nl := int64(bytes.Count(content, []byte{'\n'}))
		res.EndLine = res.StartLine + max(nl-1, 0)
		if len(content) > 0 && content[len(content)-1] != '\n' {
			res.EndLine = res.StartLine + nl // ends inside a line
		} else if res.NextOffset != nil {
			res.NextLine = res.EndLine + 1
		}
		if len(content) == 0 {
			res.EndLine = 0
		}
	}
	res.Content = tools.ValidText(content)
	return tools.StructuredResult(res)
}

// readAt reads up to n bytes of f from off; fewer at the end of the file.
func readAt(f *os.File, off int64, n int) ([]byte, error) {
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	return buf[:got], nil
}

// intoRune is how many bytes from b[at] on belong to a UTF-8 character
// that starts before at (0 when at starts a character or the bytes are
// not valid UTF-8 there).
func intoRune(b []byte, at int) int {
	for s := at - 1; s >= 0 && s >= at-(utf8.UTFMax-1); s-- {
		if !utf8.RuneStart(b[s]) {
			continue
		}
		if r, size := utf8.DecodeRune(b[s:]); (r != utf8.RuneError || size > 1) && s+size > at {
			return s + size - at
		}
		return 0
	}
	return 0
}

// linesEnd is the length of b's first k lines (each with its '\n'), or
// len(b) when b holds fewer.
func linesEnd(b []byte, k int64) int {
	n := 0
	for ; k > 0; k-- {
		i := bytes.IndexByte(b[n:], '\n')
		if i < 0 {
			return len(b)
		}
		n += i + 1
	}
	return n
}

// lineStart finds where line (1-based) starts in f. found is false when the
// file has fewer lines; lines is then how many it has. A file's last line
// need not end with '\n'; an empty file has no lines.
func lineStart(ctx context.Context, f *os.File, line int64) (lines, at int64, found bool, err error) {
	buf := make([]byte, lineScanBytes)
	var off int64
	seen := int64(0) // newlines before off
	last := byte('\n')
	for {
		if seen == line-1 {
			// Line `line` starts at off, if the file has a byte there.
			probe, err := readAt(f, off, 1)
			if err != nil {
				return 0, 0, false, err
			}
			if len(probe) == 1 {
				return 0, off, true, nil
			}
			return seen, 0, false, nil
		}
		if err := ctx.Err(); err != nil {
			return 0, 0, false, err
		}
		n, err := f.ReadAt(buf, off)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, 0, false, err
		}
		if n == 0 {
			if last != '\n' {
				seen++ // an unterminated last line
			}
			return seen, 0, false, nil
		}
		chunk := buf[:n]
		for len(chunk) > 0 && seen < line-1 {
			i := bytes.IndexByte(chunk, '\n')
			if i < 0 {
				break
			}
			seen++
			off += int64(i + 1)
			chunk = chunk[i+1:]
		}
		if seen < line-1 {
			off += int64(len(chunk))
			last = buf[n-1]
		}
	}
}
