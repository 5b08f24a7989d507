package agent

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// namer names an event's attributes and data the way the request carried
// them, so a refusal speaks in the request's own terms: a structured event
// has members, a binary-mode one has ce-* headers and a body.
type namer bool

const (
	structured namer = false
	binary     namer = true
)

func (n namer) attr(a string) string {
	if n == binary {
		return "header ce-" + a
	}
	return a
}

func (n namer) data() string {
	if n == binary {
		return "the body (the event's data)"
	}
	return "data"
}

func (n namer) dataObject() string {
	if n == binary {
		return "the body (the event's data) must be a JSON object when Content-Type is JSON; send other data with another Content-Type"
	}
	return "data must be a JSON object"
}

func (n namer) jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	var pe *time.ParseError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return fmt.Sprintf("%s has the wrong type", n.attr(te.Field))
	case errors.As(err, &pe):
		return fmt.Sprintf("%s must be an RFC 3339 timestamp", n.attr("time"))
	}
	return "invalid JSON"
}

// IsBinary reports whether a request carries its event in binary content
// mode (CloudEvents HTTP protocol binding): it has a ce-specversion header
// and its media type is not one of the structured and batch ones.
func IsBinary(h http.Header, mediaType string) bool {
	switch mediaType {
	case "application/cloudevents+json", "application/cloudevents-batch+json":
		return false
	}
	return len(h.Values("Ce-Specversion")) > 0
}

// FromBinary turns a binary-mode request into the structured event it
// stands for, for PrepareBinary: every ce-<name> header is the attribute
// <name> (percent-decoded), Content-Type is datacontenttype, and the body
// is the data: JSON for a JSON media type, data_base64 otherwise. Its
// errors wrap ErrMalformed.
func FromBinary(h http.Header, body []byte) (json.RawMessage, error) {
	m := map[string]any{}
	for k, vals := range h {
		name, ok := cutFold(k, "ce-")
		if !ok {
			continue
		}
		name = strings.ToLower(name)
		if len(vals) != 1 {
			return nil, fmt.Errorf("header ce-%s is repeated: %w", name, ErrMalformed)
		}
		switch name {
		case "data", "data_base64", "datacontenttype":
			return nil, fmt.Errorf("header ce-%s: in binary mode the data is the body and Content-Type its datacontenttype: %w", name, ErrMalformed)
		}
		v, err := url.PathUnescape(vals[0])
		if err != nil {
			return nil, fmt.Errorf("header ce-%s is not percent-encoded: %w", name, ErrMalformed)
		}
		m[name] = v
	}
	ct := h.Get("Content-Type")
	if ct != "" {
		m["datacontenttype"] = ct
	}
	if len(body) > 0 {
		if jsonMedia(ct) {
			if !json.Valid(body) {
				return nil, fmt.Errorf("the body is not JSON, as Content-Type %s says: %w", ct, ErrMalformed)
			}
			m["data"] = json.RawMessage(body)
		} else {
			m["data_base64"] = base64.StdEncoding.EncodeToString(body)
		}
	}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("binary-mode event: %w", ErrMalformed)
	}
	return b, nil
}

func cutFold(s, prefix string) (string, bool) {
	if len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix) {
		return s[len(prefix):], true
	}
	return s, false
}
