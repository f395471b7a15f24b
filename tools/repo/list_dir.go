package repo

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"

	"troupe/protocol"
	"troupe/tools"
	"troupe/workspace"
)

const (
	listDirDefaultEntries = 2000
	listDirMaxEntries     = 100000
)

// listDirTool is repo.listDir.
type listDirTool struct {
	ws *workspace.Root
}

type listDirArgs struct {
	Path       *string  `json:"path"`
	MaxEntries *float64 `json:"maxEntries"`
}

// listDirResult is repo.listDir's structuredContent.
type listDirResult struct {
	Entries   []dirEntry `json:"entries"`
	Truncated bool       `json:"truncated"`
}

type dirEntry struct {
	Name      string `json:"name"`
	Type      string `json:"type"`
	SizeBytes *int64 `json:"sizeBytes,omitempty"`
}

const listDirInputSchema = `{
  "type": "object",
  "properties": {
    "path": {
      "type": "string",
      "description": "Directory to list, relative to the workspace root (\"\" or \".\" is the root itself). An absolute path is accepted if it lies inside the workspace."
    },
    "maxEntries": {
      "type": "integer",
      "minimum": 1,
      "maximum": 100000,
      "default": 2000,
      "description": "Return at most this many entries (the first ones by name)."
    }
  },
  "required": ["path"],
  "additionalProperties": false
}`

const listDirOutputSchema = `{
  "type": "object",
  "properties": {
    "entries": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "name": {"type": "string"},
          "type": {"type": "string", "enum": ["file", "dir", "symlink", "other"]},
          "sizeBytes": {"type": "integer", "minimum": 0}
        },
        "required": ["name", "type"],
        "additionalProperties": false
      }
    },
    "truncated": {"type": "boolean"}
  },
  "required": ["entries", "truncated"],
  "additionalProperties": false
}`

// Spec describes repo.listDir.
func (t *listDirTool) Spec() tools.Spec {
	return tools.Spec{
		Name:  NameListDir,
		Title: "List directory",
		Description: "List the entries of one directory in the workspace, sorted by name. " +
			"Each entry has a name and a type: \"file\" (with sizeBytes), \"dir\", \"symlink\" or \"other\" (FIFO, socket, device). " +
			"Symlinks are listed, not followed; name a symlinked directory as the path to list its contents. " +
			"Not recursive. At most maxEntries entries (default 2000, up to 100000) are returned; truncated tells whether more exist. " +
			"Paths are relative to the workspace root; paths outside it are refused. To read a file, use repo.readFile.",
		InputSchema:  json.RawMessage(listDirInputSchema),
		SchemasFixed: true, // constants; CheckSchemas in the tests
		OutputSchema: json.RawMessage(listDirOutputSchema),
		Annotations:  readOnly("List directory"),
	}
}

// Call lists the directory. It reads names in batches and keeps only the
// first maxEntries of them by name, so a directory with millions of
// entries costs memory in proportion to maxEntries, not to its size.
func (t *listDirTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	var args listDirArgs
	call, err := decodePathCall(t.ws, NameListDir, req.Arguments, &args, &args.Path, &args.MaxEntries,
		pathLimit{"maxEntries", listDirDefaultEntries, 1, listDirMaxEntries})
	if err != nil {
		return nil, err
	}
	arg, rel, limit := call.arg, call.rel, call.limit
	// O_NONBLOCK: the path may name a FIFO, whose open would otherwise
	// wait for a writer.
	f, err := t.ws.Root().OpenFile(rel, syscall.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, workspace.ToolError(workspace.Read, arg, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, workspace.ToolError(workspace.Read, arg, err)
	}
	if !fi.IsDir() {
		if fi.Mode().IsRegular() {
			return nil, tools.Errorf(tools.KindInvalidArgument, "path %q is a file, not a directory; use %s to read it", arg, NameReadFile)
		}
		return nil, tools.Errorf(tools.KindInvalidArgument, "path %q is not a directory", arg)
	}

	var kept []fs.DirEntry
	truncated := false
	byName := func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) }
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		batch, err := f.ReadDir(1024)
		kept = append(kept, batch...)
		if len(kept) > 2*limit {
			slices.SortFunc(kept, byName)
			kept = slices.Delete(kept, limit, len(kept))
			truncated = true
		}
		if errors.Is(err, io.EOF) || (err == nil && len(batch) == 0) {
			break
		}
		if err != nil {
			return nil, workspace.ToolError(workspace.Read, arg, err)
		}
	}
	slices.SortFunc(kept, byName)
	if len(kept) > limit {
		kept = kept[:limit]
		truncated = true
	}

	res := listDirResult{Entries: make([]dirEntry, 0, len(kept)), Truncated: truncated}
	for _, d := range kept {
		e := dirEntry{Name: tools.ValidText([]byte(d.Name())), Type: entryType(d.Type())}
		if e.Type == "file" {
			// Through the root, not DirEntry.Info: that lstats the
			// entry by its host path, outside the root's protection.
			if info, err := t.ws.Root().Lstat(path.Join(rel, d.Name())); err == nil && info.Mode().IsRegular() {
				size := info.Size()
				e.SizeBytes = &size
			}
		}
		res.Entries = append(res.Entries, e)
	}
	return tools.StructuredResult(res)
}

// entryType names a directory entry's type as the output schema does.
func entryType(m fs.FileMode) string {
	switch {
	case m.IsRegular():
		return "file"
	case m.IsDir():
		return "dir"
	case m&fs.ModeSymlink != 0:
		return "symlink"
	}
	return "other"
}
