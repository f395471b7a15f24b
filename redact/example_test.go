package redact_test

import (
	"fmt"
	"log/slog"
	"os"

	"troupe/redact"
)

func ExampleRedactor_Replace() {
	env := map[string]string{"GITHUB_TOKEN": "ghp_example123", "LANG": "C.UTF-8"}
	r := redact.New("from-config-secret").With(redact.EnvValues(env)...)
	fmt.Println(r.Replace("push with ghp_example123 (LANG=C.UTF-8)"))
	// Output: push with [redacted] (LANG=C.UTF-8)
}

func ExampleRedactor_Writer() {
	r := redact.New("hunter2-password")
	w := r.Writer(os.Stdout)
	// A secret split across writes, as a tool's output may be.
	fmt.Fprint(w, "login: hunter2-pa")
	fmt.Fprint(w, "ssword ok\n")
	w.Close()
	// Output: login: [redacted] ok
}

func ExampleHandler() {
	var live redact.Live
	live.Store(redact.New("s3cr3t-token"))
	h := slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // keep the example's output stable
			}
			return a
		},
	})
	log := slog.New(redact.Handler(h, &live))
	log.Info("request", "authorization", "Bearer s3cr3t-token")

	// On config reload, swap the Redactor: every logger follows.
	live.Store(redact.New("rotated-token"))
	log.Info("request", "authorization", "Bearer rotated-token")
	// Output:
	// level=INFO msg=request authorization="Bearer [redacted]"
	// level=INFO msg=request authorization="Bearer [redacted]"
}
