package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// int80 makes one 32-bit system call (int 0x80) from x86-64 code: the
// sandbox's system-call filter kills a process for that (SIGSYS).
const int80Main = `package main

func int80()

func main() { int80() }
`

const int80Asm = `#include "textflag.h"

TEXT ·int80(SB), NOSPLIT, $0
	MOVL $20, AX
	INT $0x80
	RET
`

// A program the sandbox's filter killed is a permission_denied refusal
// that names the policy and the setting that would allow it (issue 24,
// item 4a), not a program that "was killed by signal SIGSYS".
func TestSeccompKillIsAPermissionRefusal(t *testing.T) {
	if runtime.GOARCH != "amd64" {
		t.Skip("the foreign-architecture call is written for x86-64")
	}
	fx := newFixture(t)
	src := t.TempDir()
	writeTree(t, src, map[string]string{"go.mod": "module int80\n\ngo 1.22\n", "main.go": int80Main, "int80_amd64.s": int80Asm})
	bin := filepath.Join(fx.dir, "int80")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Dir = src
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the int 0x80 program: %v\n%s", err, out)
	}
	file := downstreamConfig(t, `
[mcp.int80]
command = "`+bin+`"
description = "Makes a 32-bit system call."
side_effects = []
requires_approval = false
`)
	s := startServer(t, fx.dir, "--config", file)
	s.initializeAs(`{}`)
	s.send(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"int80","arguments":{}}}`)
	res := s.recvMessage()
	text := resultText(t, res)
	if !isToolError(res) || !strings.Contains(text, "kind: permission_denied") {
		t.Fatalf("want a permission_denied refusal, got: %s", text)
	}
	wantAll(t, "int80", text, `the sandbox (profile "default") killed the program`, "system-call filter",
		`sandbox_profile = "none" in its [mcp."int80"] table`)
}
