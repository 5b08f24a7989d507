package ingest

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// TestStoredRecordsStillDecode: raw records written by earlier code — a v1
// record, and a v2 record compressed with dictionary 0x57470001 — decode
// to the body they were written from. It fails if the embedded dictionary
// changes under the same id (a new dictionary needs a new id, and the old
// one kept for the decoder). WAKEGATE_UPDATE_GOLDEN=1 writes the v2 file
// again (only ever with a new dictionary id).
func TestStoredRecordsStillDecode(t *testing.T) {
	body, err := os.ReadFile("../../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		t.Fatal(err)
	}
	d := &Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
		Repo: "Codertocat/Hello-World", Workspace: "ws", Body: body, Received: time.UnixMilli(1700000000123).UTC()}
	if os.Getenv("WAKEGATE_UPDATE_GOLDEN") == "1" {
		v2, _, _, err := encodeRaw(d, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("testdata/raw-v1.bin", encodeRawV1(d), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("testdata/raw-v2-57470001.bin", v2, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"testdata/raw-v1.bin", "testdata/raw-v2-57470001.bin"} {
		v, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeRaw("g1", "42", v)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		// the objects as the store keeps them: compressed with the dictionary
		objs := map[[objHashLen]byte][]byte{}
		_, parts, _ := splitBody(body, nil)
		for _, o := range parts {
			data, err := decodeObject(o.sum, encodeObject(o.data))
			if err != nil {
				t.Fatal(err)
			}
			objs[o.sum] = data
		}
		got, err := r.assemble(objs)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if !bytes.Equal(got.Body, body) || got.GUID != "g1" || got.Hook != "42" || got.Repo != d.Repo || got.Workspace != "ws" ||
			got.Event != "pull_request" || got.ContentType != "application/json" || !got.Received.Equal(d.Received) {
			t.Fatalf("%s decodes to %+v (body %d bytes), want the delivery it was written from", f, got, len(got.Body))
		}
	}
}
