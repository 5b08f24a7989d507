package github

import (
	"strconv"

	"github.com/wakegate/wakegate/providers/event"
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
	b = appendString(b, d.Repo)
	b = append(b, `,"number":`...)
	b = strconv.AppendInt(b, int64(d.Number), 10)
	b = append(b, `,"action":`...)
	b = appendString(b, d.Action)
	b = append(b, `,"title":`...)
	b = appendString(b, d.Title)
	b = append(b, `,"url":`...)
	b = appendString(b, d.URL)
	b = append(b, `,"author":`...)
	b = appendString(b, d.Author)
	b = append(b, `,"head":`...)
	b = appendString(b, d.Head)
	b = append(b, `,"base":`...)
	b = appendString(b, d.Base)
	b = append(b, `,"state":`...)
	b = appendString(b, d.State)
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
			b = appendString(b, l)
		}
		b = append(b, ']')
	}
	if d.Label != "" {
		b = append(b, `,"label":`...)
		b = appendString(b, d.Label)
	}
	if d.Before != "" {
		b = append(b, `,"before":`...)
		b = appendString(b, d.Before)
	}
	if d.Reason != "" {
		b = append(b, `,"reason":`...)
		b = appendString(b, d.Reason)
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

// appendString writes s as json.Marshal does (docs/design.md §14).
func appendString(b []byte, s string) []byte { return event.AppendString(b, s, true) }
