package downstream

import (
	"errors"
	"io"
	"strings"
	"testing"
)

func TestSSEReader(t *testing.T) {
	body := ": keep-alive\r\n\r\nid: a-1\r\nretry: 250\r\ndata: {\"x\":\r\ndata: 1}\r\n\r\n" +
		"event: other\ndata: skip\n\nid: a-2\ndata:\n\ndata: cut off"
	r := newSSEReader(strings.NewReader(body))
	e, err := r.next()
	if err != nil || e.id != "a-1" || e.retry != 250 || string(e.data) != "{\"x\":\n1}" {
		t.Fatalf("first event %+v, %v", e, err)
	}
	if e, err = r.next(); err != nil || e.event != "other" || string(e.data) != "skip" {
		t.Fatalf("second event %+v, %v", e, err)
	}
	if e, err = r.next(); err != nil || e.id != "a-2" || len(e.data) != 0 {
		t.Fatalf("priming event %+v, %v", e, err)
	}
	if _, err = r.next(); !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		t.Fatalf("an event cut off by the end: %v", err)
	}
}

func TestSSEReaderBoundsEvents(t *testing.T) {
	big := "data: " + strings.Repeat("x", maxEventBytes) + "\n\n"
	if _, err := newSSEReader(strings.NewReader(big)).next(); !errors.Is(err, errEventTooLarge) {
		t.Fatalf("an oversized event: %v", err)
	}
}

func TestIDKey(t *testing.T) {
	if idKey([]byte(`"7"`)) == idKey([]byte(`7`)) || idKey([]byte(` 7`)) != idKey([]byte(`7`)) {
		t.Fatal("string and number ids must differ, spacing must not")
	}
}
