package benchmark_test

import (
	"context"
	"testing"

	"troupe/tools"
	"troupe/tools/benchmark"
)

func TestEcho(t *testing.T) {
	reg, err := tools.NewRegistry(benchmark.Echo())
	if err != nil {
		t.Fatal(err)
	}
	e, _ := reg.Lookup("echo")
	args, err := e.Validate([]byte(`{"text":"hi"}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := e.Tool.Call(context.Background(), &tools.Request{Arguments: args})
	if err != nil || len(res.Content) != 1 || res.Content[0].Text != "hi" {
		t.Fatalf("%+v %v", res, err)
	}
	if _, err := e.Validate([]byte(`{}`)); err == nil {
		t.Fatal("echo without text accepted")
	}
}
