package downstream

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strconv"
	"strings"
)

// maxEventBytes bounds one SSE event (one JSON-RPC message) from a server.
const maxEventBytes = 16 << 20

// errEventTooLarge ends a stream whose event exceeds maxEventBytes.
var errEventTooLarge = errors.New("an SSE event exceeds the size limit")

// sseEvent is one server-sent event.
type sseEvent struct {
	id    string // "" when the event set none
	event string // "" means "message"
	data  []byte
	retry int // milliseconds; 0 when not set
}

// sseReader parses a text/event-stream body (the WHATWG rules that MCP
// uses: data lines joined with \n, comments ignored, an event ends at an
// empty line).
type sseReader struct {
	r *bufio.Reader
}

func newSSEReader(body io.Reader) *sseReader {
	return &sseReader{r: bufio.NewReaderSize(body, 64<<10)}
}

// next returns the next event. At the end of the body it returns io.EOF;
// an event cut off by the end is dropped, as the standard says.
func (s *sseReader) next() (sseEvent, error) {
	var e sseEvent
	var data bytes.Buffer
	started := false
	for {
		line, err := s.line()
		if err != nil {
			return sseEvent{}, err
		}
		if len(line) == 0 {
			if started {
				e.data = bytes.TrimSuffix(data.Bytes(), []byte("\n"))
				return e, nil
			}
			continue
		}
		if line[0] == ':' {
			continue // a comment (keep-alive)
		}
		field, value, _ := strings.Cut(string(line), ":")
		value = strings.TrimPrefix(value, " ")
		started = true
		switch field {
		case "data":
			if data.Len()+len(value) > maxEventBytes {
				return sseEvent{}, errEventTooLarge
			}
			data.WriteString(value)
			data.WriteByte('\n')
		case "id":
			if !strings.ContainsRune(value, 0) {
				e.id = value
			}
		case "event":
			e.event = value
		case "retry":
			if n, err := strconv.Atoi(value); err == nil && n >= 0 {
				e.retry = n
			}
		}
	}
}

// line reads one line without its line ending (\n or \r\n).
func (s *sseReader) line() ([]byte, error) {
	var buf []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if len(buf)+len(chunk) > maxEventBytes {
			return nil, errEventTooLarge
		}
		switch {
		case err == nil && buf == nil:
			return bytes.TrimSuffix(chunk[:len(chunk)-1], []byte("\r")), nil
		case err == nil:
			buf = append(buf, chunk...)
			return bytes.TrimSuffix(buf[:len(buf)-1], []byte("\r")), nil
		case errors.Is(err, bufio.ErrBufferFull):
			buf = append(buf, chunk...)
		default:
			if errors.Is(err, io.EOF) && len(buf)+len(chunk) > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
	}
}
