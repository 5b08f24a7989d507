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

func TestFindOctokit(t *testing.T) {
	body, err := os.ReadFile("../../../../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		t.Fatal(err)
	}
	sps := Find(body)
	if len(sps) == 0 {
		t.Fatal("no spans")
	}
	for _, sp := range sps {
		if body[sp.Start] != '{' || body[sp.End-1] != '}' || sp.End-sp.Start < MinSpan {
			t.Fatalf("span %v is not a shared object: %.40q", sp, body[sp.Start:sp.End])
		}
	}
}
