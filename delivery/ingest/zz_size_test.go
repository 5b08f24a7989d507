package ingest

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
)

func TestZZSize(t *testing.T) {
	body, _ := os.ReadFile("../../testdata/github/octokit/pull_request/opened.payload.json")
	rest, objs, refs := splitBody(body, nil)
	fmt.Println("body", len(body), "rest", len(rest), "objs", len(objs), "refs", len(refs))
	for _, o := range objs {
		fmt.Println(" obj", len(o.data), len(encodeObject(o.data)))
	}
	d := &Delivery{GUID: "606a2c0d-4eac-42c9-906f-d341c6ce42dd", Event: "pull_request", Hook: "4242", ContentType: "application/json", Repo: "Codertocat/Hello-World", Workspace: "default", Body: body, Received: time.Now()}
	rec, _, _ := encodeRaw(d, nil)
	fmt.Println("record", len(rec))
	for _, lvl := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault, zstd.SpeedBetterCompression} {
		e, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl), zstd.WithEncoderCRC(false), zstd.WithEncoderDict(githubDict))
		e2, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl), zstd.WithEncoderCRC(false))
		fmt.Println(lvl, "rest dict", len(e.EncodeAll(rest, nil)), "rest nodict", len(e2.EncodeAll(rest, nil)), "body dict", len(e.EncodeAll(body, nil)))
	}
	os.WriteFile("/tmp/rest.json", rest, 0o644)
}
