package codexagent

// supported says whether this system can run Codex the way this package
// does.
const supported = true
