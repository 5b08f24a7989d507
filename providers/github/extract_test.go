package github

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestExtract(t *testing.T) {
	dir := fixturesDir(t)
	tests := []struct {
		file string
		want Meta
	}{
		{"octokit/pull_request/opened.payload.json", Meta{Action: "opened", Repo: "Codertocat/Hello-World", InstallationID: 1}},
		{"octokit/pull_request/ready_for_review.payload.json", Meta{Action: "ready_for_review", Repo: "Codertocat/Hello-World"}},
		{"octokit/check_suite/requested.payload.json", Meta{Action: "requested", Repo: "Codertocat/Hello-World", InstallationID: 957387}},
		{"octokit/installation/created.payload.json", Meta{Action: "created", InstallationID: 957387}},
		{"octokit/ping/with-organization.payload.json", Meta{}},
	}
	for _, tt := range tests {
		body, err := os.ReadFile(filepath.Join(dir, tt.file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := Extract(body)
		if err != nil {
			t.Errorf("Extract(%s): %v", tt.file, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Extract(%s) = %+v, want %+v", tt.file, got, tt.want)
		}
	}
}

func TestExtractMalformed(t *testing.T) {
	for _, body := range []string{``, `{`, `[]`, `"x"`, `{"repository":"x"}`, `{"installation":{"id":"1"}}`, `{"installation":{"id":1.5}}`, `{"action":"opened"} trailing`, `{"action":"opened","x":[1,}`, `{"a":"\x01"}`} {
		if _, err := Extract([]byte(body)); !errors.Is(err, ErrMalformed) {
			t.Errorf("Extract(%q) = %v, want ErrMalformed", body, err)
		}
	}
}
