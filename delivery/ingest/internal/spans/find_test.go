package spans

import (
	"os"
	"testing"
)

// BenchmarkFind: the shared-object scan of octokit's 28 KB
// pull_request/opened, as the gateway runs it on every delivery.
func BenchmarkFind(b *testing.B) {
	body, err := os.ReadFile("../../../../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if len(Find(body)) == 0 {
			b.Fatal("no spans")
		}
	}
}
