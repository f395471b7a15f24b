package audit

import "testing"

// BenchmarkEncode measures one record's line as a batch's write makes it:
// its canonical form, the SHA-256 of it and the line with the hash filled
// in, appended to the batch's buffer.
func BenchmarkEncode(b *testing.B) {
	r := call(1)
	r.Prev = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	buf, prev := make([]byte, 0, 1024), []byte(r.Prev)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = appendLine(buf[:0], &r, prev); err != nil {
			b.Fatal(err)
		}
	}
}
