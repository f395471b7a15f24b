package gate_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"troupe/gate"
	"troupe/internal/jsonvalue"
	"troupe/tools"
)

// goldenCalls are calls whose hashes were computed by the hash's first
// implementation (encoding/json: arguments unmarshalled into any, the
// bound struct marshalled). Approvals sealed in 2026-07-28 request states
// and audit records bind these hashes: they must never change.
var goldenCalls = []struct {
	name string
	call gate.Call
	hash string
}{
	{"echo", gate.Call{Spec: tools.Spec{Name: "echo"}, Arguments: json.RawMessage(`{"text":"hello"}`)}, "fc6fcfb4e05ba73fcf9a2f9c8d13b4dff0125efabea6d1226b799db43643d567"},
	{"no arguments", gate.Call{Spec: tools.Spec{Name: "echo"}}, "34f2b2754a48d6ce08704d97f80dcf9c821fe06624aba3ca041b6f83a84451a3"},
	{"empty object", gate.Call{Spec: tools.Spec{Name: "echo"}, Arguments: json.RawMessage(`{}`)}, "06c060f60c3c5fdfe251b5c1a2a4031e92450fd0a9305914ab3091e8d76d821b"},
	{"shell", gate.Call{Spec: tools.Spec{Name: "shell.exec", Safety: tools.Safety{SandboxProfile: "default", AllowNetwork: true}},
		Arguments: json.RawMessage(`{"command":["go","test","./..."],"cwd":"sub/dir","env":{"B":"2","A":"1"},"timeout_ms":30000}`),
		Preview:   &tools.Preview{Cwd: "sub/dir", Env: map[string]string{"B": "2", "A": "1", "<&>": "\u2028"}, Command: []string{"go", "test", "./..."}}}, "02b58b118711e7c6e2c0bf3100db693478dd921d0662b2ba7ff5e2453c49724a"},
	{"empty preview", gate.Call{Spec: tools.Spec{Name: "t"}, Arguments: json.RawMessage(`{"x":[]}`),
		Preview: &tools.Preview{Env: map[string]string{}, Command: []string{}}}, "2c462652d7581d64be8737c3141e7a5d5dc1f83af7451524507f7234f99f945a"},
	{"session", gate.Call{Spec: tools.Spec{Name: "t"}, Arguments: json.RawMessage(`{"x":{}}`),
		Session: &tools.Overrides{Cwd: "w", Env: map[string]string{"Z": "z", "TOKEN": "s"}}}, "33761efebad3454336cddf18759800b5d3915a42e49bb5e576533c9f76ffcc06"},
	{"empty session", gate.Call{Spec: tools.Spec{Name: "t"}, Arguments: json.RawMessage(`{"x":null}`), Session: &tools.Overrides{}}, "c181103ad6729847790092f7b8dc725dfa5357a6050efdb2bb23e546b885e711"},
	{"numbers", gate.Call{Spec: tools.Spec{Name: "n"}, Arguments: json.RawMessage(
		`{"a":1,"b":1.0,"c":1e2,"d":-0,"e":12345678901234567890,"f":1e-7,"g":1e21,"h":0.1,"i":-1.5E+3,"j":123456789012345678,"k":5e-324,"l":1e-400}`)}, "6663e8ff7f5880427ab276fe9ed12ab5c00e9f06654b09fe721138ceb90de403"},
	{"number out of range", gate.Call{Spec: tools.Spec{Name: "n"}, Arguments: json.RawMessage(`{"a":1e400,"b":[1,-1e999],"c":"x"}`)}, "35a176486426bbdec707ac0832ff6606ef1c8342e608c453a75b4e29c3423530"},
	{"strings", gate.Call{Spec: tools.Spec{Name: "s"}, Arguments: json.RawMessage(
		`{"html":"<a href='x'>&amp;</a>","ctl":"\u0000\u0001\b\f\n\r\t\u001f\u007f","sep":"\u2028\u2029","esc":"\"\\\/","emoji":"\ud83d\ude00 é 中","lone":"\ud800 \udc00 x","bad":"` + "\xff\xfe" + `"}`)}, "7aa0300432e86bb8e2c5be8217652d0928d057ce9039d0c1eb07d49881ed09fe"},
	{"keys", gate.Call{Spec: tools.Spec{Name: "k"}, Arguments: json.RawMessage(
		`{"b":1,"a":2,"é":3,"A":4,"<":5,"dup":1,"dup":2,"\u0000":6,"":7,"nested":{"z":[true,false,null,{"y":"x","x":"y"}],"a":{}}}`)}, "9da96b2d59b6417b71e1d9ae312669e807af1d92e10d2b6e996a24ec499dfb1d"},
	{"array arguments", gate.Call{Spec: tools.Spec{Name: "a"}, Arguments: json.RawMessage(`[1,"2",[3]]`)}, "0018871b29ced9cf63ff06f70fe39521d3796f8be64e529c13a9382be64ba440"},
	{"tool name", gate.Call{Spec: tools.Spec{Name: "odd<name>&\u2028"}, Arguments: json.RawMessage(`{}`)}, "03238172e4fbf41bd810b4d12691d535345cfb41a965de7732a19eec01c86179"},
}

func TestHashIsStable(t *testing.T) {
	for _, c := range goldenCalls {
		if got := gate.Hash(c.call); got != c.hash {
			t.Errorf("%s: hash %s, was %s", c.name, got, c.hash)
		}
		if got := firstHash(c.call); got != c.hash {
			t.Errorf("%s: the first implementation's hash %s, was %s", c.name, got, c.hash)
		}
		if len(c.call.Arguments) == 0 || c.call.Arguments[0] != '{' {
			continue
		}
		decoded, err := jsonvalue.Decode(c.call.Arguments)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		c.call.Decoded = decoded.(map[string]any)
		if got := gate.Hash(c.call); got != c.hash {
			t.Errorf("%s: hash from the decoded arguments %s, was %s", c.name, got, c.hash)
		}
	}
}

// firstHash is Hash as it was first written, with encoding/json: what the
// hash must keep computing.
func firstHash(c gate.Call) string {
	var args any
	_ = json.Unmarshal(c.Arguments, &args)
	bound := struct {
		Tool    string            `json:"tool"`
		Args    any               `json:"args"`
		Cwd     string            `json:"cwd"`
		Env     map[string]string `json:"env"`
		Command []string          `json:"command"`
		Sandbox string            `json:"sandbox"`
		Network bool              `json:"network"`
		Session *tools.Overrides  `json:"session,omitempty"`
	}{Session: c.Session, Tool: c.Spec.Name, Args: args, Sandbox: c.Spec.Safety.SandboxProfile, Network: c.Spec.Safety.AllowNetwork}
	if c.Preview != nil {
		bound.Cwd, bound.Env, bound.Command = c.Preview.Cwd, c.Preview.Env, c.Preview.Command
	}
	b, _ := json.Marshal(bound)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// FuzzHashFromDecodedArguments checks that the hash of a call whose
// arguments were decoded once by the registry is the hash encoding/json
// made of the same call.
func FuzzHashFromDecodedArguments(f *testing.F) {
	for _, c := range goldenCalls {
		var env, cmd string
		if c.call.Preview != nil {
			for k, v := range c.call.Preview.Env {
				env += k + "=" + v + "\n"
			}
			cmd = strings.Join(c.call.Preview.Command, "\n")
		}
		f.Add(c.call.Spec.Name, string(c.call.Arguments), "cwd", env, cmd, c.call.Session != nil)
	}
	r, err := tools.NewRegistry(specTool{tools.Spec{Name: "t", InputSchema: json.RawMessage(`{"type":"object"}`)}})
	if err != nil {
		f.Fatal(err)
	}
	e, _ := r.Lookup("t")
	f.Fuzz(func(t *testing.T, name, args, cwd, env, cmd string, session bool) {
		a, err := e.Check(json.RawMessage(args))
		if err != nil {
			return
		}
		c := gate.Call{Spec: tools.Spec{Name: name, Safety: tools.Safety{SandboxProfile: cwd + "p", AllowNetwork: session}},
			Arguments: a.Raw, Preview: &tools.Preview{Cwd: cwd, Env: map[string]string{}}}
		for kv := range strings.Lines(env) {
			k, v, _ := strings.Cut(strings.TrimSuffix(kv, "\n"), "=")
			c.Preview.Env[k] = v
		}
		if cmd != "" {
			c.Preview.Command = strings.Split(cmd, "\n")
		}
		if session {
			c.Session = &tools.Overrides{Cwd: cwd, Env: c.Preview.Env}
		}
		want := firstHash(c)
		if got := gate.Hash(c); got != want {
			t.Fatalf("Hash from the text: %s, was %s", got, want)
		}
		c.Decoded = a.Value
		if got := gate.Hash(c); got != want {
			t.Fatalf("Hash from the decoded value: %s, was %s", got, want)
		}
	})
}
