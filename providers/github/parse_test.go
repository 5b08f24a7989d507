package github

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// TestParseMeta: Parse's meta of a few payloads, beside their facts.
func TestParseMeta(t *testing.T) {
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
		event := filepath.Base(filepath.Dir(tt.file))
		got, fact, err := Parse(event, body)
		if err != nil {
			t.Errorf("Parse(%s): %v", tt.file, err)
			continue
		}
		if got != tt.want {
			t.Errorf("Parse(%s) = %+v, want %+v", tt.file, got, tt.want)
		}
		if want, err := Normalize(event, body); err != nil || !reflect.DeepEqual(fact, want) {
			t.Errorf("Parse(%s)'s fact = %+v, want Normalize's %+v (%v)", tt.file, fact, want, err)
		}
	}
}

// TestParseKeysExact: a payload's keys match exactly, not ignoring case
// as encoding/json would ("Action" is not the action), while a stored
// fact's still decode ignoring case (DecodeFact).
func TestParseKeysExact(t *testing.T) {
	m, _, _ := Parse("pull_request", []byte(`{"Action":"opened","repository":{"Full_Name":"o/r","full_name":"o/s"}}`))
	if m.Action != "" || m.Repo != "o/s" {
		t.Errorf("Parse's meta = %+v, want no action and repository o/s", m)
	}
	f, err := DecodeFact([]byte(`{"event":"pull_request","ACTION":"opened"}`))
	if err != nil || f.Event != "pull_request" || f.Action != "opened" {
		t.Errorf("DecodeFact = %+v, %v", f, err)
	}
}

func TestParseNotJSON(t *testing.T) {
	for _, body := range []string{``, `{`, `[]`, `"x"`, `{"repository":"x"}`, `{"installation":{"id":"1"}}`, `{"installation":{"id":1.5}}`, `{"action":"opened"} trailing`, `{"action":"opened","x":[1,}`, `{"a":"\x01"}`} {
		for _, event := range []string{"pull_request", "installation", "push"} {
			if m, _, err := Parse(event, []byte(body)); !errors.Is(err, ErrNotJSON) || m != (Meta{}) {
				t.Errorf("Parse(%s, %q) = %+v, %v, want ErrNotJSON", event, body, m, err)
			}
		}
	}
	// JSON that lacks what its mapping needs: its meta, and not ErrNotJSON
	m, _, err := Parse("pull_request", []byte(`{"action":"opened","repository":{"full_name":"o/r"}}`))
	if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrNotJSON) || m.Repo != "o/r" {
		t.Errorf("Parse of a pull_request without one = %+v, %v", m, err)
	}
}
