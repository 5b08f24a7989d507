package agent

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/kind"
)

// MaxBatch is the most events one push may carry.
const MaxBatch = 100

// Errors of Decode and Prepare; Prepare's per-event errors wrap one of them.
var (
	ErrMalformed = kind.New(kind.Invalid, "malformed")     // not JSON, or not an event or a batch of them → 400
	ErrTooMany   = kind.New(kind.TooLarge, "too many")     // a batch over MaxBatch → 413
	ErrInvalid   = kind.New(kind.Unprocessable, "invalid") // an event breaks the grammar → 422
	ErrForbidden = kind.New(kind.Forbidden, "forbidden")   // the token may not push this event → 403
)

// Decode splits a push body into its events: a JSON array is a batch, an
// object a single event. The media type decides nothing beyond that the
// gateway accepted it.
func Decode(body []byte) (raw []json.RawMessage, batch bool, err error) {
	body = bytes.TrimSpace(body)
	batch = len(body) > 0 && body[0] == '['
	limit := event.MaxDepth // the event object, then its data
	if batch {
		limit++
	}
	// The journal's readers decode with the same limit (docs/design.md §4).
	if event.CheckDepth(body, limit) != nil {
		return nil, batch, fmt.Errorf("an event's data nests more than %d levels: %w", event.MaxDataDepth, ErrInvalid)
	}
	if batch {
		if err := json.Unmarshal(body, &raw); err != nil {
			return nil, true, fmt.Errorf("batch is not a JSON array of events: %w", ErrMalformed)
		}
		if len(raw) > MaxBatch {
			return nil, true, fmt.Errorf("batch of %d events, at most %d: %w", len(raw), MaxBatch, ErrTooMany)
		}
		return raw, true, nil // an empty batch is valid: nothing to accept
	}
	if len(body) == 0 || body[0] != '{' || !json.Valid(body) {
		return nil, false, fmt.Errorf("body is not a JSON object or array: %w", ErrMalformed)
	}
	return []json.RawMessage{body}, false, nil
}

// incoming is a CloudEvent as an agent sends it. Attributes the server sets
// (source, seq, terminal, coalescekey, lineage) are read only to be ignored.
type incoming struct {
	SpecVersion     *string         `json:"specversion"`
	ID              *string         `json:"id"`
	Source          *string         `json:"source"`
	Type            *string         `json:"type"`
	Subject         string          `json:"subject"`
	Time            *time.Time      `json:"time"`
	DataContentType string          `json:"datacontenttype"`
	Workspace       string          `json:"workspace"`
	SessionID       string          `json:"sessionid"`
	Priority        string          `json:"priority"`
	Summary         string          `json:"summary"`
	Data            json.RawMessage `json:"data"`
	DataBase64      *string         `json:"data_base64"`
}

// EventError says why one event of a push was refused.
type EventError struct {
	Index  int    `json:"index"`
	ID     string `json:"id,omitempty"`
	Detail string `json:"detail"`
	err    error
}

func (e *EventError) Error() string { return fmt.Sprintf("event %d: %s", e.Index, e.Detail) }
func (e *EventError) Unwrap() error { return e.err }

// Prepared is an accepted event and what it asks of the registry.
type Prepared struct {
	Event       *event.Event
	Parent      string // session.spawned data.parent
	Labels      []string
	PausedUntil time.Time
	Reason      string
	PROpened    *PRClaim // session.pr_opened
}

// PRClaim is what session.pr_opened links.
type PRClaim struct {
	Repo   string
	Number int
}

// Prepare validates and authorizes the events of one push for the token's
// claims and fills in what the server sets. It returns every event's
// error, not just the first; with any error nothing may be committed.
func Prepare(c *Claims, raw []json.RawMessage, now time.Time) ([]*Prepared, []*EventError) {
	return prepareAll(c, raw, now, structured)
}

// PrepareBinary is Prepare for the one event of a binary-mode request,
// raw as FromBinary made it: its errors name headers and the body.
func PrepareBinary(c *Claims, raw json.RawMessage, now time.Time) ([]*Prepared, []*EventError) {
	return prepareAll(c, []json.RawMessage{raw}, now, binary)
}

func prepareAll(c *Claims, raw []json.RawMessage, now time.Time, n namer) ([]*Prepared, []*EventError) {
	var out []*Prepared
	var errs []*EventError
	for i, r := range raw {
		p, err := prepare(c, r, now, n)
		if err != nil {
			var ee *EventError
			if !errors.As(err, &ee) {
				ee = &EventError{Detail: err.Error(), err: err}
			}
			ee.Index = i
			errs = append(errs, ee)
			continue
		}
		out = append(out, p)
	}
	return out, errs
}

func bad(id string, sentinel error, format string, args ...any) error {
	return &EventError{ID: id, Detail: fmt.Sprintf(format, args...), err: sentinel}
}

func prepare(c *Claims, r json.RawMessage, now time.Time, n namer) (*Prepared, error) {
	var in incoming
	dec := json.NewDecoder(bytes.NewReader(r))
	if err := dec.Decode(&in); err != nil {
		return nil, bad("", ErrInvalid, "not a CloudEvent: %s", n.jsonProblem(err))
	}
	id := ""
	if in.ID != nil {
		id = *in.ID
	}
	switch {
	case in.SpecVersion == nil || *in.SpecVersion != event.SpecVersion:
		return nil, bad(id, ErrInvalid, "%s must be %q", n.attr("specversion"), event.SpecVersion)
	case id == "" || len(id) > 256:
		return nil, bad(id, ErrInvalid, "%s is required, at most 256 characters", n.attr("id"))
	case in.Source == nil || *in.Source == "":
		return nil, bad(id, ErrInvalid, "%s is required (the server replaces it)", n.attr("source"))
	case in.Type == nil || !event.ValidType(*in.Type):
		return nil, bad(id, ErrInvalid, "%s must match ^[a-z0-9_]+(\\.[a-z0-9_]+)+$", n.attr("type"))
	case len(in.Summary) > 1024:
		return nil, bad(id, ErrInvalid, "%s is at most 1024 characters", n.attr("summary"))
	case len(in.DataContentType) > 256:
		return nil, bad(id, ErrInvalid, "%s is at most 256 characters", n.attr("datacontenttype"))
	}
	typ := *in.Type
	if in.Workspace != "" && in.Workspace != c.Workspace {
		return nil, bad(id, ErrForbidden, "%s %q is not the token's", n.attr("workspace"), in.Workspace)
	}
	if strings.HasPrefix(typ, "github.") || strings.HasPrefix(typ, "wakegate.") {
		return nil, bad(id, ErrForbidden, "%s %s is the server's alone", n.attr("type"), typ)
	}
	sessionID, err := sessionOf(c, id, in.Subject, in.SessionID, n)
	if err != nil {
		return nil, err
	}
	hasData := len(in.Data) > 0 && !bytes.Equal(in.Data, []byte("null"))
	var bin []byte
	switch {
	case hasData && in.DataBase64 != nil:
		return nil, bad(id, ErrInvalid, "data and data_base64 are exclusive")
	case in.DataBase64 != nil:
		if bin, err = base64.StdEncoding.DecodeString(*in.DataBase64); err != nil {
			return nil, bad(id, ErrInvalid, "data_base64 is not base64 (RFC 4648)")
		}
	case hasData && in.Data[0] != '{':
		return nil, bad(id, ErrInvalid, "%s", n.dataObject())
	case hasData && in.DataContentType != "" && !jsonMedia(in.DataContentType):
		return nil, bad(id, ErrInvalid, "datacontenttype %q is not JSON: send data of another type as data_base64", in.DataContentType)
	}
	ext, err := extensions(id, r, n)
	if err != nil {
		return nil, err
	}
	if event.CheckDepth(in.Data, event.MaxDataDepth) != nil {
		return nil, bad(id, ErrInvalid, "data nests more than %d levels", event.MaxDataDepth)
	}
	prio := event.DefaultPriority(typ, in.Data)
	if in.Priority != "" {
		asked := event.Priority(in.Priority)
		if asked.Rank() < 0 {
			return nil, bad(id, ErrInvalid, "%s must be info, attention or critical", n.attr("priority"))
		}
		if asked.Rank() > prio.Rank() && !c.Has("events:push:any") {
			return nil, bad(id, ErrForbidden, "%s above %s needs events:push:any", n.attr("priority"), prio)
		}
		prio = asked
	}
	t := now.UTC()
	if in.Time != nil {
		t = in.Time.UTC()
	}
	subject := event.SessionSubject(sessionID)
	e := &event.Event{
		SpecVersion: event.SpecVersion, ID: id, Source: event.AgentSource(c.Workspace, string(c.Party())),
		Type: typ, Subject: subject, Time: t, DataContentType: "application/json",
		Workspace: c.Workspace, SessionID: sessionID, Priority: prio,
		CoalesceKey: subject, Terminal: event.Lookup(typ).Terminal, Summary: in.Summary, Extensions: ext,
	}
	switch {
	case in.DataBase64 != nil:
		e.DataBase64, e.DataContentType = bin, in.DataContentType
		if len(bin) == 0 {
			e.DataBase64 = nil
		}
	case hasData:
		e.Data = in.Data
		if in.DataContentType != "" {
			e.DataContentType = in.DataContentType
		}
	}
	if typ == event.TypeMessageSent {
		e.CoalesceKey = "message:" + e.Source + ":" + id // each message is its own entry
	}
	p := &Prepared{Event: e}
	return p, fill(p, id, typ, in.Data, n)
}

// jsonMedia reports whether a media type is JSON: application/json or a
// +json suffix.
func jsonMedia(ct string) bool {
	mt, _, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	return mt == "application/json" || strings.HasSuffix(mt, "+json")
}

// extensions are the client's extension attributes of an event
// (docs/design.md §4): every member wakegate has no attribute of its own
// for, named by the spec's rules, a scalar, bounded in count and size.
// A null is an absent attribute.
func extensions(id string, r json.RawMessage, n namer) (map[string]json.RawMessage, error) {
	var out map[string]json.RawMessage
	size := 0
	err := event.Members(r, func(name string, val []byte) error {
		if event.Known(name) || bytes.Equal(val, []byte("null")) {
			return nil
		}
		if !event.ValidExtensionName(name) {
			return bad(id, ErrInvalid, "%s: extension attribute names are lowercase a-z and 0-9, at most 20 characters", n.attr(name))
		}
		switch {
		case val[0] == '"':
			if name == "dataschema" {
				var s string
				if json.Unmarshal(val, &s) != nil || !validURI(s) {
					return bad(id, ErrInvalid, "%s must be a URI", n.attr(name))
				}
			}
		case val[0] == 't' || val[0] == 'f':
		case val[0] == '-' || '0' <= val[0] && val[0] <= '9':
			if _, err := strconv.ParseInt(string(val), 10, 32); err != nil {
				return bad(id, ErrInvalid, "%s: a number must be a CloudEvents integer (32-bit, no fraction)", n.attr(name))
			}
		default:
			return bad(id, ErrInvalid, "%s must be a string, an integer or a boolean", n.attr(name))
		}
		size += len(name) + len(val)
		if out == nil {
			out = map[string]json.RawMessage{}
		}
		out[name] = json.RawMessage(val)
		if len(out) > event.MaxExtensions || size > event.MaxExtensionBytes {
			return bad(id, ErrInvalid, "at most %d extension attributes of %d bytes in all", event.MaxExtensions, event.MaxExtensionBytes)
		}
		return nil
	})
	if err != nil {
		var ee *EventError
		if errors.As(err, &ee) {
			return nil, err
		}
		return nil, bad(id, ErrInvalid, "not a CloudEvent: invalid JSON")
	}
	return out, nil
}

func validURI(s string) bool {
	u, err := url.Parse(s)
	return err == nil && s != "" && u.Scheme != ""
}

// sessionOf decides which session an event is about: a session token
// pushes only about itself; events:push:any about any session.
func sessionOf(c *Claims, id, subject, sessionID string, n namer) (string, error) {
	if subject != "" {
		s, ok := strings.CutPrefix(subject, "session:")
		if !ok || !event.ValidID(s) {
			return "", bad(id, ErrForbidden, "%s %q: agents push about session:<id> subjects only", n.attr("subject"), subject)
		}
		if sessionID != "" && sessionID != s {
			return "", bad(id, ErrInvalid, "%s %q and %s %q disagree", n.attr("sessionid"), sessionID, n.attr("subject"), subject)
		}
		sessionID = s
	}
	if sessionID != "" && !event.ValidID(sessionID) {
		return "", bad(id, ErrInvalid, "%s %q is not a valid id", n.attr("sessionid"), sessionID)
	}
	own := c.Party().Session()
	if sessionID == "" {
		if own == "" {
			return "", bad(id, ErrInvalid, "%s or %s is required for a token that is not a session's", n.attr("subject"), n.attr("sessionid"))
		}
		return own, nil
	}
	if sessionID != own && !c.Has("events:push:any") {
		return "", bad(id, ErrForbidden, "a session pushes only about itself (events:push:any pushes about others)")
	}
	return sessionID, nil
}

// fill reads the data of the types that act on the registry or on links.
func fill(p *Prepared, id, typ string, data json.RawMessage, n namer) error {
	var d struct {
		Parent string   `json:"parent"`
		Labels []string `json:"labels"`
		Until  string   `json:"until"`
		Reason string   `json:"reason"`
		Repo   string   `json:"repo"`
		Number int      `json:"number"`
	}
	if len(data) > 0 {
		if err := json.Unmarshal(data, &d); err != nil {
			return bad(id, ErrInvalid, "%s: %s", n.data(), jsonProblem(err))
		}
	}
	switch typ {
	case event.TypeSessionSpawned:
		if d.Parent != "" {
			parent := strings.TrimPrefix(d.Parent, "session:")
			if !event.ValidID(parent) {
				return bad(id, ErrInvalid, "data.parent %q is not a session id", d.Parent)
			}
			if parent == p.Event.SessionID {
				return bad(id, ErrInvalid, "a session cannot be its own parent")
			}
			p.Parent = parent
		}
		for _, l := range d.Labels {
			if !event.ValidID(l) {
				return bad(id, ErrInvalid, "label %q must match ^[A-Za-z0-9._-]{1,128}$", l)
			}
		}
		p.Labels = d.Labels
	case event.TypeSessionPaused:
		if d.Until != "" {
			t, err := time.Parse(time.RFC3339, d.Until)
			if err != nil {
				return bad(id, ErrInvalid, "data.until must be an RFC 3339 time")
			}
			p.PausedUntil = t
		}
		p.Reason = d.Reason
	case event.TypeSessionPrOpened:
		owner, name, ok := strings.Cut(d.Repo, "/")
		if !ok || !event.ValidID(owner) || !event.ValidID(name) || d.Number <= 0 {
			return bad(id, ErrInvalid, "session.pr_opened needs data.repo (org/repo) and data.number")
		}
		p.PROpened = &PRClaim{Repo: d.Repo, Number: d.Number}
	}
	return nil
}

// jsonProblem describes a decoding error without echoing input.
func jsonProblem(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("field %q has the wrong type", te.Field)
	}
	return "invalid JSON"
}
