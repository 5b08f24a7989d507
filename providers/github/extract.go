package github

import (
	"encoding/json"
	"errors"
	"fmt"
)

// ErrMalformed is wrapped by every error Extract and Normalize return: the
// body is not JSON, or lacks what its event's mapping needs.
var ErrMalformed = errors.New("github: malformed payload")

// Meta is what the ingress hot path needs from a delivery before it commits
// it: which repository (to pick the workspace) and which installation.
type Meta struct {
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

// Extract decodes only repository.full_name and installation.id from a JSON
// payload. Malformed JSON returns an error wrapping ErrMalformed.
func Extract(body []byte) (Meta, error) {
	var env envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return Meta{}, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return Meta{Repo: env.Repository.FullName, InstallationID: env.Installation.ID}, nil
}
