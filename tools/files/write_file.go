package files

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"syscall"
	"unicode/utf8"

	"troupe/protocol"
	"troupe/tools"
	"troupe/workspace"
)

const (
	// MaxWriteBytes is the most content fs.writeFile writes in one call:
	// 16 MiB, far more than a source file needs and little enough that a
	// runaway model cannot fill the disk in a few calls. The input schema
	// and the tool's description state it.
	MaxWriteBytes = 16 << 20
	// newFileMode is a new file's mode before the umask, as editors use.
	newFileMode fs.FileMode = 0o644
	// writeChunk is how much is written between two looks at the context,
	// so a cancelled call on a slow disk stops within one chunk.
	writeChunk = 1 << 20
	// tempBaseMax caps the target's name inside the temporary file's name,
	// so the temporary name stays under the usual 255-byte limit.
	tempBaseMax = 200
)

// writeFileTool is fs.writeFile.
type writeFileTool struct {
	ws *workspace.Root
	// beforeRename, when set, runs right before the context's last check
	// and the rename. Only tests set it, to cancel a call at the last
	// moment it can still be undone.
	beforeRename func()
}

type writeFileArgs struct {
	Path       *string         `json:"path"`
	Content    json.RawMessage `json:"content"` // raw, to see what encoding/json would hide (textArg)
	CreateDirs *bool           `json:"createDirs"`
}

// writeFileResult is fs.writeFile's structuredContent.
type writeFileResult struct {
	Path         string `json:"path"`
	BytesWritten int    `json:"bytesWritten"`
}

const writeFileInputSchema = `{
  "type": "object",
  "properties": {
    "path": {
      "type": "string",
      "description": "File to write, relative to the workspace root. An absolute path is accepted if it lies inside the workspace. Must not be or pass through a symbolic link."
    },
    "content": {
      "type": "string",
      "maxLength": 16777216,
      "description": "The file's complete new content, as UTF-8 text. At most 16 MiB (16777216 bytes of UTF-8)."
    },
    "createDirs": {
      "type": "boolean",
      "default": false,
      "description": "Create missing parent directories. Without it, a missing parent directory is an error."
    }
  },
  "required": ["path", "content"],
  "additionalProperties": false
}`

const writeFileOutputSchema = `{
  "type": "object",
  "properties": {
    "path": {"type": "string", "description": "The file's clean path relative to the workspace root."},
    "bytesWritten": {"type": "integer", "minimum": 0, "description": "The file's new size in bytes."}
  },
  "required": ["path", "bytesWritten"],
  "additionalProperties": false
}`

// Spec describes fs.writeFile.
func (t *writeFileTool) Spec() tools.Spec {
	yes, no := true, false
	return tools.Spec{
		Name:  NameWriteFile,
		Title: "Write file",
		Description: "Create or replace a text file in the workspace with the given content. Returns the file's workspace-relative path and the number of bytes written. " +
			"Each call needs a person's approval. " +
			"The write is atomic: the content goes to a temporary file that is then renamed over the target, so the file is never left half-written, and a failed call leaves the old file as it was. " +
			"An existing file keeps its permissions; a read-only file is refused. " +
			"content is the whole file (not a patch), UTF-8 text of at most 16 MiB (16777216 bytes). " +
			"Missing parent directories are an error unless createDirs is true. " +
			"Paths are relative to the workspace root; paths outside it are refused, and so are symbolic links, both as the file and as any directory on the way to it (name the real path instead). " +
			"Directories, FIFOs, sockets and devices cannot be written. To read a file first, use repo.readFile.",
		InputSchema:  json.RawMessage(writeFileInputSchema),
		SchemasFixed: true, // constants; CheckSchemas in the tests
		OutputSchema: json.RawMessage(writeFileOutputSchema),
		Annotations: &protocol.ToolAnnotations{
			Title:           "Write file",
			ReadOnlyHint:    &no,
			DestructiveHint: &yes, // it replaces whatever the file held
			IdempotentHint:  &yes, // the same call twice leaves the same file
			OpenWorldHint:   &no,
		},
		Safety: tools.Safety{
			HighRisk:         true,
			RequiresApproval: true,
			SideEffects:      []string{"filesystem"},
			// No SandboxProfile: the tool runs no process; the workspace's
			// os.Root is its confinement.
		},
	}
}

// Call writes the file: check everything that can be checked without
// touching the disk, walk to the parent directory, check the target, write
// a temporary file beside it and rename it over the target.
func (t *writeFileTool) Call(ctx context.Context, req *tools.Request) (*protocol.CallToolResult, error) {
	var args writeFileArgs
	if err := tools.DecodeArgs(NameWriteFile, req.Arguments, &args); err != nil {
		return nil, err
	}
	if args.Path == nil {
		return nil, tools.Errorf(tools.KindInvalidArgument, "path is required")
	}
	content, err := textArg("content", args.Content, MaxWriteBytes)
	if err != nil {
		return nil, err
	}
	tg, err := resolveTarget(t.ws, *args.Path)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}

	dir, err := openParent(t.ws.Root(), tg, args.CreateDirs != nil && *args.CreateDirs)
	if err != nil {
		return nil, err
	}
	defer dir.Close()
	perm, keep, err := checkTarget(dir, tg)
	if err != nil {
		return nil, err
	}
	if err := t.replace(ctx, dir, tg, content, perm, keep); err != nil {
		return nil, err
	}
	return tools.StructuredResult(writeFileResult{Path: tg.rel, BytesWritten: len(content)})
}

// checkTarget looks at what is at t.base in dir now. It returns the mode
// the new file gets, and whether that mode must be set explicitly (an
// existing file's, which the umask must not narrow).
func checkTarget(dir *os.Root, t target) (perm fs.FileMode, keep bool, err error) {
	// A name that changes between the lstat and the open is looked at
	// again: concurrent writers of one file (this tool renames a new file
	// over the name) do that all the time, and only a name that keeps
	// changing, or changed into something else, is refused.
	const tries = 8
	for try := 1; ; try++ {
		perm, keep, swapped, err := checkTargetOnce(dir, t)
		if !swapped || try == tries {
			return perm, keep, err
		}
	}
}

// checkTargetOnce is one look of checkTarget; swapped reports that the
// name was replaced between the lstat and the open (err is then the
// refusal to give if it keeps happening).
func checkTargetOnce(dir *os.Root, t target) (perm fs.FileMode, keep, swapped bool, err error) {
	fi, err := dir.Lstat(t.base)
	if errors.Is(err, fs.ErrNotExist) {
		return newFileMode, false, false, nil
	}
	if err != nil {
		return 0, false, false, workspace.ToolError(workspace.Write, t.arg, err)
	}
	if err := refuseType(t, fi); err != nil {
		return 0, false, false, err
	}
	// Opening for writing (without O_TRUNC, so nothing changes) asks the
	// kernel whether this user may write the file, which the rename alone
	// would not. O_NONBLOCK keeps a FIFO swapped in meanwhile from
	// blocking the open.
	f, err := dir.OpenFile(t.base, os.O_WRONLY|syscall.O_NONBLOCK, 0)
	if errors.Is(err, syscall.ETXTBSY) {
		// A program being run from the file: the rename replaces it
		// without disturbing the running copy.
		return fi.Mode().Perm(), true, false, nil
	}
	if errors.Is(err, fs.ErrPermission) {
		return 0, false, false, tools.Errorf(tools.KindPermissionDenied,
			"path %q is read-only (mode %04o) or not writable by troupe's user; it is left as it is", t.arg, fi.Mode().Perm())
	}
	if errors.Is(err, syscall.ENXIO) {
		return 0, false, false, notRegular(t)
	}
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, true, workspace.ToolError(workspace.Write, t.arg, err) // removed meanwhile: look again
	}
	if err != nil {
		return 0, false, false, workspace.ToolError(workspace.Write, t.arg, err)
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return 0, false, false, workspace.ToolError(workspace.Write, t.arg, err)
	}
	if !os.SameFile(fi, opened) {
		// The name was swapped between the lstat and the open; the open
		// may have followed a symlink.
		return 0, false, true, symlinkError(t, t.rel)
	}
	return opened.Mode().Perm(), true, false, nil
}

// refuseType refuses a target that is not a regular file.
func refuseType(t target, fi fs.FileInfo) error {
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return symlinkError(t, t.rel)
	case fi.IsDir():
		return tools.Errorf(tools.KindInvalidArgument, "path %q is a directory; name a file", t.arg)
	case !fi.Mode().IsRegular():
		return notRegular(t)
	}
	return nil
}

func notRegular(t target) error {
	return tools.Errorf(tools.KindInvalidArgument, "path %q is not a regular file (it is a FIFO, socket or device); only regular files can be written", t.arg)
}

// replace writes content to a new temporary file in dir and renames it
// over t.base. Until the rename succeeds, any failure removes the
// temporary file, so nothing is left behind and the target is untouched.
func (t *writeFileTool) replace(ctx context.Context, dir *os.Root, tg target, content string, perm fs.FileMode, keep bool) error {
	f, tmp, err := createTemp(dir, tg.base, perm)
	if err != nil {
		return workspace.ToolError(workspace.Write, tg.arg, err)
	}
	renamed := false
	defer func() {
		if !renamed {
			f.Close() // a second Close only returns an error, which we ignore
			dir.Remove(tmp)
		}
	}()

	if keep {
		// fchmod, unlike the mode given at creation, is not narrowed by
		// the umask, so the replacement has exactly the old file's bits.
		if err := f.Chmod(perm); err != nil {
			return workspace.ToolError(workspace.Write, tg.arg, err)
		}
	}
	for off := 0; off < len(content); off += writeChunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		if _, err := f.WriteString(content[off:min(off+writeChunk, len(content))]); err != nil {
			return workspace.ToolError(workspace.Write, tg.arg, err)
		}
	}
	// The data must be on disk before the name points at it, or a crash
	// could leave the target empty.
	if err := f.Sync(); err != nil {
		return workspace.ToolError(workspace.Write, tg.arg, err)
	}
	if err := f.Close(); err != nil {
		return workspace.ToolError(workspace.Write, tg.arg, err)
	}
	if t.beforeRename != nil {
		t.beforeRename()
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// rename(2) replaces the name itself and never follows a symlink
	// there, so a link swapped in since checkTarget is replaced, not
	// written through.
	if err := dir.Rename(tmp, tg.base); err != nil {
		if errors.Is(err, fs.ErrExist) || errors.Is(err, syscall.EISDIR) {
			return tools.Errorf(tools.KindInvalidArgument, "path %q is a directory; name a file", tg.arg)
		}
		return workspace.ToolError(workspace.Write, tg.arg, err)
	}
	renamed = true
	// Flush the directory so the rename itself survives a crash. It is
	// best effort: the new content is in place and visible, some file
	// systems refuse fsync on directories, and reporting a failure now
	// would tell the model its write failed when it did not.
	if d, err := dir.Open("."); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// createTemp creates ".<base>.troupe-<random>.tmp" in dir with O_EXCL, so
// it is always a new file of ours and never something an attacker placed
// there (O_EXCL also refuses to follow a symlink at that name).
func createTemp(dir *os.Root, base string, perm fs.FileMode) (*os.File, string, error) {
	prefix := "." + base[:tools.UTF8Cut([]byte(base), tempBaseMax)] + ".troupe-"
	var err error
	for range 3 { // a collision of 64 random bits is not expected; retry all the same
		var b [8]byte
		rand.Read(b[:]) // never fails (crypto/rand since Go 1.24)
		name := prefix + hex.EncodeToString(b[:]) + ".tmp"
		var f *os.File
		f, err = dir.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if err == nil {
			return f, name, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			break
		}
	}
	return nil, "", err
}

// textArg decodes a JSON string argument of at most limit bytes and
// refuses text that is not UTF-8. encoding/json does not refuse it: it turns invalid bytes and lone
// surrogate escapes ("\ud800") into U+FFFD without a word, and a file
// would get replacement characters the model never sent. The framing layer
// already refuses lines that are not UTF-8; escapes pass it, and tools
// called directly get no such check, so both are looked for here.
func textArg(name string, raw json.RawMessage, limit int) (string, error) {
	if len(raw) == 0 || string(raw) == "null" { // json.Unmarshal takes null for a string and leaves it ""
		return "", tools.Errorf(tools.KindInvalidArgument, "%s is required", name)
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", tools.Errorf(tools.KindInvalidArgument, "%s must be a string", name)
	}
	if len(s) > limit {
		return "", tools.Errorf(tools.KindInvalidArgument,
			"%s is %d bytes of UTF-8; %s writes at most %d bytes (16 MiB) per call", name, len(s), NameWriteFile, limit)
	}
	if !utf8.Valid(raw) {
		return "", tools.Errorf(tools.KindInvalidArgument, "%s is not valid UTF-8 text", name)
	}
	if at := loneSurrogate(raw); at >= 0 {
		return "", tools.Errorf(tools.KindInvalidArgument,
			"%s is not valid UTF-8 text: it has an unpaired surrogate escape (%s) at byte %d of the JSON string", name, raw[at:at+6], at)
	}
	return s, nil
}

// loneSurrogate returns the offset in the JSON string literal s of a \u
// escape of a UTF-16 surrogate that is not part of a high-low pair, or -1.
// s is known to be a well-formed JSON string.
func loneSurrogate(s []byte) int {
	for i := 0; i < len(s); i++ {
		// Jump to the next escape: most of a file's text has none.
		j := bytes.IndexByte(s[i:], '\\')
		if j < 0 {
			return -1
		}
		i += j
		if s[i+1] != 'u' {
			i++ // skip the escaped character, which may be a backslash
			continue
		}
		r := hexRune(s[i+2 : i+6])
		switch {
		case r >= 0xDC00 && r <= 0xDFFF:
			return i // a low surrogate with no high one before it
		case r >= 0xD800 && r <= 0xDBFF:
			if i+12 > len(s) || s[i+6] != '\\' || s[i+7] != 'u' {
				return i
			}
			if lo := hexRune(s[i+8 : i+12]); lo < 0xDC00 || lo > 0xDFFF {
				return i
			}
			i += 11 // the pair is fine; go on after it
		default:
			i += 5
		}
	}
	return -1
}

// hexRune decodes four hex digits, which a well-formed \u escape has.
func hexRune(h []byte) rune {
	var r rune
	for _, c := range h {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		}
	}
	return r
}
