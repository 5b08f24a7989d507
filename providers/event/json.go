package event

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"unsafe"

	"github.com/bytedance/sonic"
)

// Lineage is a session's ancestors, nearest first. On the wire it is one
// CloudEvents string attribute, the ids separated by single spaces
// (session ids hold no spaces): docs/design.md §2. In memory it is the list
// the router climbs. Stored events of the older form (a JSON array) still
// read.
type Lineage []string

// String is the attribute's value: the ids, nearest first, single spaces.
func (l Lineage) String() string { return strings.Join(l, " ") }

// ParseLineage reads the attribute's value.
func ParseLineage(s string) Lineage {
	f := strings.Fields(s)
	if len(f) == 0 {
		return nil
	}
	return Lineage(f)
}

// MarshalJSON writes the lineage as one string, as json.Marshal would.
func (l Lineage) MarshalJSON() ([]byte, error) {
	s := l.String()
	return AppendString(make([]byte, 0, len(s)+2), s, true), nil
}

// UnmarshalJSON reads the string form, and the JSON array of events
// journaled before the attribute was a string.
func (l *Lineage) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) == 0 || bytes.Equal(b, []byte("null")):
		*l = nil
		return nil
	case b[0] == '[':
		var ids []string
		if err := json.Unmarshal(b, &ids); err != nil {
			return fmt.Errorf("lineage: %w", err)
		}
		*l = Lineage(ids)
		if len(ids) == 0 {
			*l = nil
		}
		return nil
	}
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' && bytes.IndexByte(b, '\\') < 0 {
		*l = ParseLineage(string(b[1 : len(b)-1])) // no escapes: the common case
		return nil
	}
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("lineage: %w", err)
	}
	*l = ParseLineage(s)
	return nil
}

// Extension attribute bounds (docs/design.md §4).
const (
	MaxExtensions     = 16
	MaxExtensionBytes = 2048
	maxExtensionName  = 20
)

// ValidExtensionName reports whether s is a CloudEvents attribute name:
// lowercase a–z and 0–9, at most 20 characters.
func ValidExtensionName(s string) bool {
	if len(s) == 0 || len(s) > maxExtensionName {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9') {
			return false
		}
	}
	return true
}

// known are the attributes Event has fields for: every other top-level
// member of an event is an extension attribute.
var known = map[string]bool{
	"specversion": true, "id": true, "source": true, "type": true, "subject": true, "time": true,
	"datacontenttype": true, "seq": true, "workspace": true, "sessionid": true, "lineage": true,
	"priority": true, "coalescekey": true, "terminal": true, "summary": true, "replay": true,
	"data": true, "data_base64": true,
}

// Known reports whether name is an attribute wakegate itself reads or sets
// (a client's value for it is never an extension).
func Known(name string) bool { return known[name] }

// plain is Event without its methods, for the generated encoding.
type plain Event

// encoder is encoding/json's output (map keys sorted, strings validated)
// without HTML escaping, as the journal stores events; sonic's, for speed:
// every reader and push encodes events.
var encoder = sonic.Config{SortMapKeys: true, ValidateString: true, CompactMarshaler: true, CopyString: true}.Froze()

// MarshalJSON writes the event in the CloudEvents JSON format, its
// extension attributes beside the others.
func (e Event) MarshalJSON() ([]byte, error) {
	b, err := encoder.Marshal((*plain)(&e))
	if err != nil {
		return nil, err
	}
	if len(e.Extensions) == 0 {
		return b, nil
	}
	names := make([]string, 0, len(e.Extensions))
	for k := range e.Extensions {
		if !known[k] {
			names = append(names, k)
		}
	}
	sort.Strings(names)
	out := b[:len(b)-1] // drop the closing brace
	for _, k := range names {
		out = append(out, ',', '"')
		out = append(out, k...)
		out = append(out, '"', ':')
		out = append(out, e.Extensions[k]...)
	}
	return append(out, '}'), nil
}

// UnmarshalJSON reads an event in the CloudEvents JSON format; members it
// has no field for are its extension attributes.
func (e *Event) UnmarshalJSON(b []byte) error {
	if err := sonic.ConfigStd.Unmarshal(b, (*plain)(e)); err != nil {
		return err
	}
	return e.extensionsOf(b)
}

// DecodeString is UnmarshalJSON from a string without copying it, for the
// readers that decode every journal entry.
func DecodeString(raw string, e *Event) error {
	if err := sonic.ConfigStd.UnmarshalFromString(raw, (*plain)(e)); err != nil {
		return err
	}
	return e.extensionsOf(unsafe.Slice(unsafe.StringData(raw), len(raw)))
}

// extensionsOf collects the members of b that are extension attributes
// (b is not modified, nor kept: the values are copied).
func (e *Event) extensionsOf(b []byte) error {
	e.Extensions = nil
	return Members(b, func(name string, val []byte) error {
		if known[name] {
			return nil
		}
		if e.Extensions == nil {
			e.Extensions = map[string]json.RawMessage{}
		}
		e.Extensions[name] = json.RawMessage(bytes.Clone(val))
		return nil
	})
}

// Extension returns the string value of an extension attribute, or "".
func (e *Event) Extension(name string) string {
	raw, ok := e.Extensions[name]
	if !ok || len(raw) == 0 || raw[0] != '"' {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// ErrNotObject is returned by Members for input that is not a JSON object.
var ErrNotObject = errors.New("not a JSON object")

// Members calls fn with the name and raw value of every top-level member
// of the JSON object b, in order, without decoding the values. A name with
// an escape sequence is passed as written between its quotes. b must be
// valid JSON (the caller decoded it already).
func Members(b []byte, fn func(name string, val []byte) error) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return ErrNotObject
	}
	i++
	for {
		i = skipSpace(b, i)
		if i >= len(b) {
			return ErrNotObject
		}
		if b[i] == '}' {
			return nil
		}
		if b[i] == ',' {
			i++
			continue
		}
		if b[i] != '"' {
			return ErrNotObject
		}
		end := skipString(b, i)
		if end < 0 {
			return ErrNotObject
		}
		name := string(b[i+1 : end-1])
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return ErrNotObject
		}
		i = skipSpace(b, i+1)
		vend := skipValue(b, i)
		if vend < 0 {
			return ErrNotObject
		}
		if err := fn(name, b[i:vend]); err != nil {
			return err
		}
		i = vend
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipString returns the index just past the string starting at b[i] ('"').
func skipString(b []byte, i int) int {
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '\\':
			j++
		case '"':
			return j + 1
		}
	}
	return -1
}

// skipValue returns the index just past the value starting at b[i].
func skipValue(b []byte, i int) int {
	if i >= len(b) {
		return -1
	}
	switch b[i] {
	case '"':
		return skipString(b, i)
	case '{', '[':
		depth := 0
		for j := i; j < len(b); j++ {
			switch b[j] {
			case '"':
				j = skipString(b, j)
				if j < 0 {
					return -1
				}
				j--
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return j + 1
				}
			}
		}
		return -1
	}
	j := i
	for j < len(b) && b[j] != ',' && b[j] != '}' && b[j] != ']' && b[j] != ' ' && b[j] != '\n' && b[j] != '\t' && b[j] != '\r' {
		j++
	}
	return j
}

// Canonical returns a stored event's JSON in today's form: an event
// journaled with lineage as a JSON array is rewritten with the string
// form; anything else is returned as it is.
func Canonical(raw []byte) []byte {
	if !bytes.Contains(raw, []byte(`"lineage":[`)) {
		return raw
	}
	var e Event
	if err := json.Unmarshal(raw, &e); err != nil {
		return raw
	}
	b, err := json.Marshal(e)
	if err != nil {
		return raw
	}
	return b
}
