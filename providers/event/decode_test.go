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
