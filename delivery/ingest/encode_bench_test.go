package ingest

import (
	"crypto/sha256"
	"os"
	"testing"
	"time"
)

// BenchmarkEncodeRaw: rendering octokit's 28 KB pull_request/opened as a
// raw record on the gateway's path, the previous format (v1: meta JSON,
// zstd of the whole body) beside the current one (v2: shared objects cut
// out, the rest zstd with the dictionary; its body marker hashed from the
// stored form), and v2 with the body's own SHA-256 as well (the marker of
// before). Read the two side by side, from
// the same run: go test -run '^$' -bench EncodeRaw -cpu 1 ./delivery/ingest
func BenchmarkEncodeRaw(b *testing.B) {
	body, err := os.ReadFile("../../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		b.Fatal(err)
	}
	d := &Delivery{GUID: "606a2c0d-4eac-42c9-906f-d341c6ce42dd", Event: "pull_request", Hook: "4242", ContentType: "application/json",
		Repo: "Codertocat/Hello-World", Workspace: "default", Body: body, Received: time.Now()}
	b.Run("v1", func(b *testing.B) {
		for b.Loop() {
			encodeRawV1(d)
		}
	})
	b.Run("v2", func(b *testing.B) {
		out := make([]byte, 0, 8<<10)
		for b.Loop() {
			if _, _, _, err := encodeRaw(d, out[:0]); err != nil {
				b.Fatal(err)
			}
		}
	})
	// v2 with the body marker of before: the body's own SHA-256 besides
	// (what a commit still pays while markers of before may be there)
	b.Run("v2+body-sha256", func(b *testing.B) {
		out := make([]byte, 0, 8<<10)
		for b.Loop() {
			if _, _, _, err := encodeRaw(d, out[:0]); err != nil {
				b.Fatal(err)
			}
			h := sha256.New()
			h.Write([]byte(d.Repo + "\x00"))
			h.Write(d.Body)
			h.Sum(nil)
		}
	})
}
