package gate_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"troupe/gate"
	"troupe/protocol"
	"troupe/tools"
	"troupe/tools/benchmark"
)

// BenchmarkValidateAndHash measures the JSON path of one tools/call before
// its tool runs: the arguments validated against the input schema, then
// the hash the gate and the audit record bind.
func BenchmarkValidateAndHash(b *testing.B) {
	shell := tools.Spec{Name: "shell.exec", InputSchema: json.RawMessage(benchShellSchema),
		Safety: tools.Safety{RequiresApproval: true, HighRisk: true, SandboxProfile: "default"}}
	for _, c := range []struct {
		name string
		tool tools.Tool
		args string
		prev *tools.Preview
	}{
		{"echo", benchmark.Echo(), `{"text":"hello"}`, nil},
		{"shell", specTool{shell}, `{"command":["go","test","-run","TestX","./..."],"cwd":"sub/dir","env":{"GOFLAGS":"-count=1"},"timeout_ms":30000}`,
			&tools.Preview{Cwd: "sub/dir", Env: map[string]string{"GOFLAGS": "-count=1"}, Command: []string{"go", "test", "-run", "TestX", "./..."}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			r, err := tools.NewRegistry(c.tool)
			if err != nil {
				b.Fatal(err)
			}
			e, _ := r.Lookup(c.tool.Spec().Name)
			raw := json.RawMessage(c.args)
			b.ReportAllocs()
			for b.Loop() {
				args, err := e.Check(raw)
				if err != nil {
					b.Fatal(err)
				}
				if h := gate.Hash(gate.Call{Spec: e.Spec(), Arguments: args.Raw, Decoded: args.Value, Preview: c.prev}); len(h) != 64 {
					b.Fatal(h)
				}
			}
		})
	}
}

const benchShellSchema = `{"type":"object","properties":{
"command":{"type":"array","items":{"type":"string"},"minItems":1},
"cwd":{"type":"string"},
"env":{"type":"object","additionalProperties":{"type":"string"}},
"timeout_ms":{"type":"integer","minimum":1}},
"required":["command"],"additionalProperties":false}`

// specTool is a tool that is only its spec: the benchmark never calls it.
type specTool struct{ spec tools.Spec }

func (t specTool) Spec() tools.Spec { return t.spec }
func (specTool) Call(context.Context, *tools.Request) (*protocol.CallToolResult, error) {
	return nil, errors.New("not called")
}
