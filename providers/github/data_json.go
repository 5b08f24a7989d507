package github

import (
	"strconv"
	"unicode/utf8"
)

// A pull_request delivery's Data was a quarter of normalizing it when
// encoding/json made it (reflection on every delivery the gateway
// takes). appendJSON writes the bytes json.Marshal writes for prData —
// its fields in order, omitempty as tagged, strings escaped as
// encoding/json escapes them — so a fact's Data is what it was
// (FuzzDataAsEncodingJSON compares the two on any strings). sonic is no
// substitute: it escapes \b and \f as \u0008 and \u000c.

func (d prData) appendJSON(b []byte) []byte {
	b = append(b, `{"repo":`...)
	b = appendJSONString(b, d.Repo)
	b = append(b, `,"number":`...)
	b = strconv.AppendInt(b, int64(d.Number), 10)
	b = append(b, `,"action":`...)
	b = appendJSONString(b, d.Action)
	b = append(b, `,"title":`...)
	b = appendJSONString(b, d.Title)
	b = append(b, `,"url":`...)
	b = appendJSONString(b, d.URL)
	b = append(b, `,"author":`...)
	b = appendJSONString(b, d.Author)
	b = append(b, `,"head":`...)
	b = appendJSONString(b, d.Head)
	b = append(b, `,"base":`...)
	b = appendJSONString(b, d.Base)
	b = append(b, `,"state":`...)
	b = appendJSONString(b, d.State)
	b = append(b, `,"draft":`...)
	b = strconv.AppendBool(b, d.Draft)
	b = append(b, `,"merged":`...)
	b = strconv.AppendBool(b, d.Merged)
	b = append(b, `,"labels":`...)
	if d.Labels == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, l := range d.Labels {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, l)
		}
		b = append(b, ']')
	}
	if d.Label != "" {
		b = append(b, `,"label":`...)
		b = appendJSONString(b, d.Label)
	}
	if d.Before != "" {
		b = append(b, `,"before":`...)
		b = appendJSONString(b, d.Before)
	}
	if d.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendJSONString(b, d.Reason)
	}
	return append(b, '}')
}

// sizeHint is appendJSON's length when nothing needs escaping.
func (d prData) sizeHint() int {
	n := 160 + 20 + len(d.Repo) + len(d.Action) + len(d.Title) + len(d.URL) + len(d.Author) +
		len(d.Head) + len(d.Base) + len(d.State) + len(d.Label) + len(d.Before) + len(d.Reason)
	for _, l := range d.Labels {
		n += len(l) + 3
	}
	return n
}

const hexDigits = "0123456789abcdef"

// appendJSONString is encoding/json's appendString with HTML escaping
// (json.Marshal's): <, > and & as \u003c…, control bytes as \b \f \n \r
// \t or \u00XX, invalid UTF-8 as \ufffd, U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
