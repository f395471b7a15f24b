package app_test

import (
	"context"
	"fmt"
	"log"
	"os"

	"troupe/app"
	"troupe/config"
)

// Example sets up troupe on a workspace and lists the tools a session
// would see, as "troupe tools" does. Serving is one more call: a.Run(ctx,
// app.RunOptions{Stdin: os.Stdin, Stdout: os.Stdout}).
func Example() {
	dir, err := os.MkdirTemp("", "app-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	cfg, err := config.Load(config.Options{
		Overrides: []string{"codex.enabled=false"},
		Environ:   []string{"HOME=" + dir}, // no user configuration
	})
	if err != nil {
		log.Fatal(err)
	}
	a, err := app.New(cfg, app.Options{Workspace: dir, Version: "v0.0.0-example"})
	if err != nil {
		log.Fatal(err) // a *app.SetupError names each problem
	}
	defer a.Close()
	list, err := a.Tools(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	for _, t := range list.Tools {
		fmt.Println(t.Name)
	}
	// Output:
	// docs.fetch
	// fs.writeFile
	// repo.listDir
	// repo.readFile
	// repo.ripgrep
	// shell.exec
}
