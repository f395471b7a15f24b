package actors

import (
	"bufio"
	"io"
	"strconv"
	"testing"
	"time"

	"troupe/tools"
)

// BenchmarkStdioCall measures one tools/call through the whole stdio path
// (framing, jsonrpc2, session, invocation, executor, reply) with 32 calls
// in flight, on in-memory pipes. Profile it with -cpuprofile.
func BenchmarkStdioCall(b *testing.B) {
	reg, err := tools.NewRegistry(echoTool())
	if err != nil {
		b.Fatal(err)
	}
	host := NewHost(Options{Session: SessionOptions{Registry: reg}})
	defer host.Close(5 * time.Second)
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	conn, err := host.ServeStream(inR, outW)
	if err != nil {
		b.Fatal(err)
	}
	lines := bufio.NewScanner(outR)
	lines.Buffer(make([]byte, 1<<20), 1<<20)
	io.WriteString(inW, `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"b","version":"1"}}}`+"\n")
	lines.Scan()
	io.WriteString(inW, `{"jsonrpc":"2.0","method":"notifications/initialized"}`+"\n")

	const inFlight = 32
	slots := make(chan struct{}, inFlight)
	done := make(chan struct{})
	b.ResetTimer()
	go func() { // one slot back per response
		defer close(done)
		for i := 0; i < b.N && lines.Scan(); i++ {
			<-slots
		}
	}()
	for i := 0; i < b.N; i++ {
		slots <- struct{}{}
		io.WriteString(inW, `{"jsonrpc":"2.0","id":`+strconv.Itoa(i+1)+`,"method":"tools/call","params":{"name":"echo","arguments":{"n":1}}}`+"\n")
	}
	<-done
	b.StopTimer()
	inW.Close()
	go func() { // drain whatever is left so the connection can close
		for lines.Scan() {
		}
	}()
	<-conn.Done()
}
