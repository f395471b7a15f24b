// Package files holds troupe's first-party tools that change the
// workspace. For now that is fs.writeFile; the read-only tools live in
// tools/repo.
//
// # Using the tools
//
// Open a workspace, build the tools and register them:
//
//	ws, err := workspace.Open("/path/to/checkout")
//	if err != nil {
//		return err
//	}
//	reg, err := tools.NewRegistry(files.Tools(ws)...)
//
// Every tool here is high-risk (tools.Safety.HighRisk): troupe asks a
// person to approve each call unless that person has trusted the tool for
// the session. The package example shows a call from start to end.
//
// # fs.writeFile
//
// Writes a whole text file: {path, content, createDirs?} in,
// {path, bytesWritten} out, path being the clean workspace-relative slash
// path. What a caller can rely on:
//
//   - Atomic. The content goes to a temporary file in the target's
//     directory (".<name>.troupe-<random>.tmp", created with O_EXCL), is
//     flushed with fsync and renamed over the target; the directory is then
//     flushed too. Readers see the old file or the new one, never half of
//     each. If anything fails, the context included, the temporary file is
//     removed and the target is untouched; the context is checked once more
//     right before the rename, the last step that can still be undone.
//   - Replacing, not editing. Because the file is replaced, a hard link to
//     the old file keeps the old content, and the new file belongs to the
//     user troupe runs as. Its permission bits (rwx for owner, group and
//     others) are copied from the old file; setuid, setgid and sticky bits
//     are not, as the kernel drops them when someone else writes a file. A
//     new file gets 0644, less the process umask, as with any editor.
//   - Existing files must be writable. A read-only file (a git object, a
//     file someone chmodded on purpose) is refused with permission_denied,
//     even though the rename could replace it: the tool honours permissions
//     the way an in-place write would.
//   - Confined, and stricter than the read tools. Paths go through
//     [workspace.Root.Rel] and every file operation through the
//     workspace's os.Root, so "..", absolute paths elsewhere and symlinks
//     leading out are refused with permission_denied. On top of that no
//     symlink is followed at all, not even one that stays inside: if the
//     target or any directory on the way to it is a symlink, the call fails
//     with permission_denied. A writer that follows links changes a file
//     other than the one the approving person saw named; naming the real
//     path instead costs the model nothing. The directories are walked one
//     at a time (lstat, open, then a check that the opened directory is the
//     one lstat saw), so a directory swapped for a symlink while the call
//     runs is caught too.
//   - Only regular files. Directories, the workspace root, FIFOs, sockets
//     and devices are refused with invalid_argument, as are paths ending in
//     "/", "/." or "/.." (they name directories).
//   - Missing directories. Without createDirs a missing parent directory is
//     not_found, and the message says to pass createDirs: true. With it,
//     missing directories are made one by one (0755 less the umask), under
//     the same symlink rules; os.Root.MkdirAll is not used because it
//     follows symlinks that stay inside the root. Directories made stay
//     when the write fails after them: they are harmless, and removing them
//     could race with someone else filling them.
//   - Text only. content is at most [MaxWriteBytes] bytes of UTF-8. JSON
//     can smuggle text that is not UTF-8 past a decoder (a lone surrogate
//     escape such as "\ud800", which encoding/json quietly turns into
//     U+FFFD); such content is refused with invalid_argument instead of
//     being written with replacement characters the model did not send.
//
// Error messages quote the path as the client sent it, or directories of
// it relative to the workspace; they never name host directories or where a
// symlink points.
package files
