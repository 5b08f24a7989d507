package bench

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// The bench binary embeds its own copy of a few GitHub payloads (go:embed
// cannot reach testdata/github at the repository root); each must stay
// byte-identical to the fixture it was copied from.
func TestEmbeddedFixturesMatchTestdata(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "github")
	for embedded, source := range map[string]string{
		"check_run.completed.json":                    "octokit/check_run/completed.payload.json",
		"check_suite.completed.json":                  "octokit/check_suite/completed.payload.json",
		"pull_request.opened.json":                    "octokit/pull_request/opened.payload.json",
		"pull_request.closed.merged.json":             "derived/pull_request.closed.merged.json",
		"pull_request_review.submitted.approved.json": "derived/pull_request_review.submitted.approved.json",
		"LICENSE.octokit":                             "octokit/LICENSE",
	} {
		want, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(source)))
		if err != nil {
			t.Fatalf("fixture missing: %v", err)
		}
		got, err := os.ReadFile(filepath.Join("fixtures", embedded))
		if err != nil {
			t.Fatalf("embedded fixture missing: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("fixtures/%s differs from testdata/github/%s", embedded, source)
		}
	}
	entries, err := fixtures.ReadDir("fixtures")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 5 {
		t.Errorf("%d embedded fixtures, this test knows 5: add the new one's source above", len(entries))
	}
}
