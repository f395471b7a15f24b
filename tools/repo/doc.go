// Package repo holds troupe's read-only repository tools: repo.listDir,
// repo.readFile and repo.ripgrep. They let a model look around the
// workspace without being able to change it or to see anything outside it.
//
// # Using the tools
//
// Open a workspace, build the tools and register them:
//
//	ws, err := workspace.Open("/path/to/checkout")
//	if err != nil {
//		return err
//	}
//	sb, err := sandbox.New(sandbox.Options{}) // confines rg; without it, the built-in search runs
//	...
//	reg, err := tools.NewRegistry(repo.Tools(ws, repo.Options{Sandbox: sb})...)
//
// A call then goes through the registry's Entry: Validate checks the
// arguments against the tool's input schema, and Tool.Call runs it. The
// package example shows the whole round trip.
//
// # Confinement
//
// Every path a client names goes through [workspace.Root.Rel] and is
// opened through the workspace's os.Root, so "..", absolute paths elsewhere
// and symlinks that lead out (at any depth, however chained) are refused
// with a permission_denied error. Symlinks that stay inside are followed
// when they are named in a path. Error messages only ever repeat the path
// the client sent; they never name host directories or symlink targets.
//
// # repo.listDir
//
// Lists one directory, sorted by name. Entries are "file", "dir",
// "symlink" (never followed, so a link's target type is not reported) or
// "other" (FIFOs, sockets, devices); files carry their size.
//
// # repo.readFile
//
// Returns a text file's content, up to maxBytes bytes. Decisions a caller
// should know about:
//
//   - A file with a NUL byte in its first 8000 bytes is binary (git's
//     heuristic) and is refused with an invalid_argument error that gives
//     its size; the model gets no mojibake.
//   - Bytes that are not valid UTF-8 are replaced with U+FFFD, so the
//     content is always a valid JSON string.
//   - Truncation at maxBytes never splits a UTF-8 sequence, so the content
//     may be up to three bytes shorter than maxBytes.
//   - Only regular files are read. The file is opened with O_NONBLOCK and
//     checked with fstat before any read, so naming a FIFO fails at once
//     instead of hanging the call, and a file swapped for a FIFO between a
//     check and the open cannot hang it either.
//
// # repo.ripgrep
//
// Searches every file of the workspace for a regular expression, line by
// line, with ripgrep's file selection: hidden files and directories are
// skipped, .gitignore, .ignore and .rgignore files are honoured at every
// level, symlinks are not followed and binary files are skipped. Globs
// select files the way rg --glob does, overriding all of that: a file a
// glob matches is searched even if it is hidden or ignored (as long as its
// directory is searched), a "!" glob excludes files and directories, with
// any glob not starting with "!" the files that match none are skipped,
// and the last glob that matches decides. Results are in path order.
//
// When an rg binary is available (Options.RipgrepPath, or rg on PATH) and
// Options.Sandbox can confine it, the tool runs it with --json in the
// workspace and streams its output; rg is killed as soon as enough matches
// are in, or when the call is cancelled. rg always runs through the
// sandbox with a read-only workspace policy: Landlock lets it read the
// workspace and its own program files and nothing else, write nothing and
// reach no network. Checking paths before rg opens them cannot keep it in:
// a directory swapped for a symlink to outside between rg's look and its
// open won that race in a few percent of calls; the kernel's check at each
// open cannot be raced. A file rg is refused is skipped, as the built-in
// search skips what it cannot read. Without a Sandbox, or where the policy
// cannot be enforced (no Landlock), the tool uses the built-in search
// instead and logs that once. A confined call costs about 5 ms more than
// an unconfined rg (the sandbox helper's start); the built-in search is
// quicker than either on small trees.
//
// Otherwise a built-in search written in Go gives the same results on the
// same tree. The built-in search exists so troupe works on hosts without
// rg; its known differences from rg are:
//
//   - Regular expressions. Queries are checked with Go's regexp (RE2
//     syntax) in both modes, so a query Go rejects is invalid_argument even
//     when rg would take it (flags like (?x), repetition counts above
//     1000). A query Go takes and rg's Rust regex does not (\Q...\E, and
//     (?<name>...) in rg 13) is invalid_argument with rg, carrying rg's
//     explanation, and works without it. A literal newline in the query is
//     refused in both, as rg refuses it. Once accepted, rg matches with
//     Rust's regex crate, where \w, \d, \s and \b are Unicode-aware; in Go
//     they are ASCII-only. Go lets ".", "[^a]" and \S match a byte that is
//     not valid UTF-8 (as U+FFFD); Rust does not.
//   - Binary files. A file with a NUL byte is binary. rg reads a file in
//     blocks of about 64 KiB and stops at the block holding the first NUL,
//     keeping the matches of the blocks before it. The built-in search
//     reads files of up to 64 MiB whole and skips them if they hold a NUL
//     anywhere; larger files are streamed, skipped if their first 64 KiB
//     hold a NUL, and otherwise searched up to the first line that holds
//     one. Files whose first NUL lies past 64 KiB can therefore yield
//     matches with rg and none without it. (One quirk of rg is copied
//     exactly: it reads a file's first three bytes on their own while it
//     looks for a byte order mark, so a whole line among them is searched
//     even when a NUL follows: in "a\nb\x00" the line "a" is.)
//   - Encodings. rg decodes UTF-16 files that start with a byte order mark;
//     the built-in search sees their NUL bytes and skips them as binary.
//     Both strip a UTF-8 byte order mark.
//   - Globs, in ignore files and in calls, follow rg's syntax: gitignore
//     rules, {a,b} alternatives, [!x] classes, "?" as one byte. Elements
//     are matched with go-git's gitignore.Pattern; ignore.go explains what
//     is built around it. A glob with a class or escape that spans a "/"
//     (a[/]b) is refused (in an ignore file, dropped), where rg takes it.
//   - A directory's .git marks a repository boundary by its mere presence,
//     as in rg; .git/info/exclude is never read (rg runs with
//     --no-ignore-exclude). Ignore files that are symlinks leading out of
//     the workspace are read by neither (the sandbox refuses them to rg).
//
// In both modes lineText has its line terminator ("\n" or "\r\n")
// removed, is cut to at most 2000 bytes on a UTF-8 boundary, and has bytes
// that are not valid UTF-8 replaced with U+FFFD.
package repo
