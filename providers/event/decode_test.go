package event

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckDepth(t *testing.T) {
	nest := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, c := range []struct {
		doc   string
		limit int
		ok    bool
	}{
		{`{}`, 1, true},
		{`{"a":{}}`, 1, false},
		{nest(64), 64, true},
		{nest(65), 64, false},
		{`{"s":"[[[[{{{{\"[[["}`, 1, true}, // brackets and escaped quotes inside strings do not count
		{`{"s":"\\"}`, 1, true},            // an escaped backslash ends before the quote
		{`["\\",[[]]]`, 2, false},
		{`"[[[["`, 0, true},
	} {
		err := CheckDepth([]byte(c.doc), c.limit)
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrTooDeep)) {
			t.Errorf("CheckDepth(%s, %d) = %v, want ok %v", c.doc, c.limit, err, c.ok)
		}
	}
	var e Event
	if err := Decode(`{"specversion":"1.0","data":`+nest(MaxDataDepth)+`}`, &e); err != nil {
		t.Errorf("data nesting %d levels: %v", MaxDataDepth, err)
	}
	if err := Decode(`{"specversion":"1.0","data":`+nest(MaxDataDepth+1)+`}`, &e); !errors.Is(err, ErrTooDeep) {
		t.Errorf("data nesting %d levels: %v, want ErrTooDeep", MaxDataDepth+1, err)
	}
}

// checkDepthRef is CheckDepth's specification, byte by byte.
func checkDepthRef(b []byte, limit int) bool {
	depth, inString, escaped := 0, false, false
	for _, c := range b {
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			if depth++; depth > limit {
				return false
			}
		case '}', ']':
			depth--
		}
	}
	return true
}

// FuzzCheckDepth: CheckDepth, which skips strings with IndexByte, agrees
// with the byte-by-byte scan on any input and limit.
func FuzzCheckDepth(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":{}}`, `{"s":"[[[[{{{{\"[[["}`, `{"s":"\\"}`, `["\\",[[]]]`, `"[[[["`, `"\\\"[["`, `["a\\\\"]]]`} {
		f.Add([]byte(s), 1)
	}
	f.Fuzz(func(t *testing.T, b []byte, limit int) {
		limit %= 8
		if got, want := CheckDepth(b, limit) == nil, checkDepthRef(b, limit); got != want {
			t.Fatalf("CheckDepth(%q, %d) ok %v, the byte-by-byte scan %v", b, limit, got, want)
		}
	})
}

// routedEvent is a routed event's JSON (a PR's ready, a summary and
// links), for the benchmarks.
var routedEvent = []byte(`{"specversion":"1.0","id":"pr/1347/ready/6dcb09b5b57875f334f61aebed695e2e4193db5e","source":"//github.com/octo-org/octo-repo","type":"pull_request.ready","subject":"github:octo-org/octo-repo#1347","time":"2026-12-06T06:00:00Z","workspace":"default","sessionid":"w-12","priority":"attention","summary":"PR #1347 ready: Amazing new feature with a longer title than most (octo-org/octo-repo)","data":{"repository":"octo-org/octo-repo","number":1347,"head":"6dcb09b5b57875f334f61aebed695e2e4193db5e","url":"https://github.com/octo-org/octo-repo/pull/1347","checks":[{"name":"ci/build","conclusion":"success"},{"name":"ci/test","conclusion":"success"}]}}`)

// BenchmarkCheckDepth skips strings with IndexByte; BenchmarkCheckDepthRef
// is the byte-by-byte scan on the same document.
func BenchmarkCheckDepth(b *testing.B) {
	b.SetBytes(int64(len(routedEvent)))
	for b.Loop() {
		if err := CheckDepth(routedEvent, MaxDepth); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCheckDepthRef(b *testing.B) {
	b.SetBytes(int64(len(routedEvent)))
	for b.Loop() {
		if !checkDepthRef(routedEvent, MaxDepth) {
			b.Fatal("too deep")
		}
	}
}
