package app

import "testing"

func TestLoopbackAddress(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:8080": true, "127.0.0.2:1": true, "[::1]:1": true, "localhost:80": true,
		"0.0.0.0:80": false, ":80": false, "[::]:80": false, "192.168.1.2:80": false, "example.com:80": false,
	} {
		if got, err := loopbackAddress(addr); err != nil || got != want {
			t.Errorf("loopbackAddress(%q) = %v, %v; want %v", addr, got, err, want)
		}
	}
}
