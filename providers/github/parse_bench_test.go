package github

import (
	"os"
	"testing"
)

// BenchmarkParse: the gateway's one parse of octokit's 28 KB
// pull_request/opened (validate, normalize) and the fact's encoding.
func BenchmarkParse(b *testing.B) {
	body, err := os.ReadFile("../../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(body)))
	b.Run("parse", func(b *testing.B) {
		for b.Loop() {
			if _, _, err := Parse("pull_request", body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("parse+encode", func(b *testing.B) {
		for b.Loop() {
			_, f, err := Parse("pull_request", body)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := EncodeFact(&f); err != nil {
				b.Fatal(err)
			}
		}
	})
}
