package event

import (
	"bytes"
	"errors"
	"fmt"
)

// MaxDataDepth is how deep an event's data may nest (docs/design.md §4):
// the push path refuses deeper data (422), and the journal's readers
// decode with the same limit, so what one accepts the others read.
const MaxDataDepth = 64

// MaxDepth is how deep an event document nests: its data is one level
// under the event object.
const MaxDepth = MaxDataDepth + 1

// ErrTooDeep is wrapped by the error of a document nesting deeper than
// its limit.
var ErrTooDeep = errors.New("nests too deep")

// CheckDepth reports an error wrapping ErrTooDeep when the JSON text b
// nests objects and arrays more than limit levels deep. It scans without
// decoding and never recurses, so its cost is linear whatever b holds; it
// does not validate b. A string is skipped to its closing quote with
// bytes.IndexByte (a quote after an odd run of backslashes is escaped):
// most of an event's bytes are in strings.
func CheckDepth(b []byte, limit int) error {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for {
				j := bytes.IndexByte(b[i+1:], '"')
				if j < 0 {
					return nil // the rest is in an unterminated string
				}
				i += 1 + j
				k := i - 1
				for b[k] == '\\' { // stops at the opening quote at the latest
					k--
				}
				if (i-1-k)%2 == 0 {
					break
				}
			}
		case '{', '[':
			if depth++; depth > limit {
				return fmt.Errorf("JSON nests more than %d levels: %w", limit, ErrTooDeep)
			}
		case '}', ']':
			depth--
		}
	}
	return nil
}

// Decode is the one decoder of stored events (docs/design.md §4): it
// refuses a document nesting deeper than MaxDepth, then decodes with
// DecodeString (lineage in either form, extension attributes kept).
func Decode(raw string, e *Event) error {
	if err := CheckDepth([]byte(raw), MaxDepth); err != nil {
		return err
	}
	return DecodeString(raw, e)
}
