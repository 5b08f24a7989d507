package spans

import (
	"bytes"
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

// stringEndByIndex is the scan stringEnd replaced (a bytes.IndexByte for
// each quote, then the backslashes before it counted back): stringEnd
// must agree with it on every input, or the split of a body, and so its
// stored-body marker, would change (docs/design.md §14).
func stringEndByIndex(b []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(b[j:], '"')
		if k < 0 {
			return -1
		}
		j += k
		n := 0
		for p := j - 1; p > i && b[p] == '\\'; p-- {
			n++
		}
		j++
		if n%2 == 0 {
			return j
		}
	}
}

func FuzzStringEnd(f *testing.F) {
	for _, s := range []string{`"a"`, `"\"" x`, `"\\" x`, `"\\\"\\" x`, `"abcdefghijklmnop\"qrstuvwxyz" `, `"abc`, `"abc\`, `"\`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '"' {
			b = append([]byte{'"'}, b...)
		}
		if got, want := stringEnd(b, 0), stringEndByIndex(b, 0); got != want {
			t.Fatalf("stringEnd(%q) = %d, want %d", b, got, want)
		}
	})
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
