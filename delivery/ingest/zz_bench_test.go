package ingest

import (
	"os"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func BenchmarkZZEncode(b *testing.B) {
	body, _ := os.ReadFile("../../testdata/github/octokit/pull_request/opened.payload.json")
	d := &Delivery{GUID: "606a2c0d-4eac-42c9-906f-d341c6ce42dd", Event: "pull_request", Hook: "4242", ContentType: "application/json", Repo: "Codertocat/Hello-World", Workspace: "default", Body: body, Received: time.Now()}
	b.Run("v1", func(b *testing.B) {
		for b.Loop() {
			encodeRawV1(d)
		}
	})
	b.Run("v2", func(b *testing.B) {
		out := make([]byte, 0, 8<<10)
		for b.Loop() {
			encodeRaw(d, out[:0])
		}
	})
	b.Run("split", func(b *testing.B) {
		out := make([]byte, 0, 32<<10)
		for b.Loop() {
			splitBody(body, out[:0])
		}
	})
	rest, _, _ := splitBody(body, nil)
	for _, lvl := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression} {
		e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl), zstd.WithEncoderCRC(false), zstd.WithEncoderDict(githubDict), zstd.WithEncoderConcurrency(1))
		b.Run("rest-"+lvl.String(), func(b *testing.B) {
			out := make([]byte, 0, 8<<10)
			for b.Loop() {
				e.EncodeAll(rest, out[:0])
			}
		})
	}
}
