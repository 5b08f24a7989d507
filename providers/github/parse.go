package github

import (
	"errors"
	"fmt"
	"unsafe"

	"github.com/bytedance/sonic"
)

// unmarshal decodes payloads: sonic in its encoding/json-compatible mode,
// about ten times faster than encoding/json on GitHub's 10–30 KB bodies
// (the gateway parses every delivery; the deriver those whose ingest
// record carries no fact). It
// validates the whole document like encoding/json does.
//
// sonic's Unmarshal copies the body into a string first (28 KB per parse);
// ConfigStd copies every string it decodes (CopyString) and nothing here
// keeps the body, so the body is lent as a string instead. An error may
// quote the input, so it is detached from the body before it is returned:
// callers may reuse the body's buffer (the gateway does).
//
// A payload's keys match the struct tags exactly (payloadAPI), where
// encoding/json would also take "Action" for "action": GitHub writes its
// keys in lower case, and most of a payload's keys are ones no struct here
// names, each of which encoding/json's rule looks up a second time
// ignoring case.
func unmarshal(body []byte, v any) error { return unmarshalWith(payloadAPI, body, v) }

func unmarshalWith(api sonic.API, body []byte, v any) error {
	err := api.UnmarshalFromString(unsafe.String(unsafe.SliceData(body), len(body)), v)
	if err != nil {
		return errors.New(err.Error())
	}
	return nil
}

// payloadAPI is sonic.ConfigStd with keys matched case-sensitively.
var payloadAPI = sonic.Config{EscapeHTML: true, SortMapKeys: true, CompactMarshaler: true, CopyString: true,
	ValidateString: true, CaseSensitive: true}.Froze()

// ErrMalformed is wrapped by every error Parse and Normalize return: the
// body is not JSON, or lacks what its event's mapping needs.
var ErrMalformed = errors.New("github: malformed payload")

// Meta is what the ingress hot path needs from a delivery before it commits
// it: which repository (to pick the workspace) and which installation.
type Meta struct {
	Action         string // the payload's action; "" for events without one (status, ping)
	Repo           string // "org/repo" from repository.full_name; "" when absent (installation, some pings)
	InstallationID int64  // installation.id; 0 when absent (repository hooks, ping)
}

// envelope holds the fields every payload shares.
type envelope struct {
	Action     string `json:"action"`
	Repository struct {
		FullName string `json:"full_name"`
	} `json:"repository"`
	Installation struct {
		ID int64 `json:"id"`
	} `json:"installation"`
}

// ErrNotJSON is Parse's error for a body that is not a JSON object (or
// whose action, repository or installation has the wrong JSON type).
var ErrNotJSON = fmt.Errorf("%w: not a JSON object", ErrMalformed)

// Parse is the gateway's one parse of a delivery: it validates the whole
// JSON payload and returns its meta and its normalized fact (Normalize).
// A body that is not JSON returns ErrNotJSON and nothing else; a JSON
// payload that lacks what its event's mapping needs returns its meta and
// Normalize's error.
func Parse(eventType string, body []byte) (Meta, Fact, error) {
	env, pre, err := decodePayload(eventType, body)
	if err != nil {
		return Meta{}, Fact{}, ErrNotJSON
	}
	m := Meta{Action: env.Action, Repo: env.Repository.FullName, InstallationID: env.Installation.ID}
	f, err := normalize(eventType, body, env, pre)
	return m, f, err
}
