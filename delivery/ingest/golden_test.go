package ingest

import (
	"bytes"
	"os"
	"testing"
	"time"
)

// TestStoredRecordsStillDecode: raw records written by earlier code — a v1
// record, a v2 record compressed with dictionary 0x57470001, a v3 record
// with dictionary 0x57470002 — decode to the body they were written from,
// with their shared objects as either dictionary compressed them. It
// fails if an embedded dictionary changes under the same id (a new
// dictionary needs a new id, and the old one kept for the decoder).
// WAKEGATE_UPDATE_GOLDEN=1 writes the current format's file again (only
// ever with a new dictionary id or format).
func TestStoredRecordsStillDecode(t *testing.T) {
	body, err := os.ReadFile("../../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		t.Fatal(err)
	}
	d := &Delivery{GUID: "g1", Event: "pull_request", Hook: "42", ContentType: "application/json",
		Repo: "Codertocat/Hello-World", Workspace: "ws", Body: body, Received: time.UnixMilli(1700000000123).UTC()}
	if os.Getenv("WAKEGATE_UPDATE_GOLDEN") == "1" {
		v3, _, _, err := encodeRaw(d, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("testdata/raw-v3-57470002.bin", v3, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"testdata/raw-v1.bin", "testdata/raw-v2-57470001.bin", "testdata/raw-v3-57470002.bin"} {
		v, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		// the objects as the store keeps them: compressed with the dictionary
		// of now or the one of before
		for _, enc := range []func([]byte) []byte{encodeObject, encodeObjectDict1} {
			objs := map[[objHashLen]byte][]byte{}
			_, parts, _, err := encodeRaw(d, nil) // the objects and their list
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range parts {
				data, err := decodeObject(o.sum, enc(o.data))
				if err != nil {
					t.Fatal(err)
				}
				objs[o.sum] = data
			}
			r, err := decodeRaw("g1", "42", v)
			if err != nil {
				t.Fatalf("%s: %v", f, err)
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
}

// TestRawTokens: v3 writes known event names and content types as one
// byte and any other as a string; both come back as they were.
func TestRawTokens(t *testing.T) {
	for _, c := range []struct{ event, ct string }{{"pull_request", "application/json"},
		{"sponsorship", "text/plain"}, {"", ""}, {"release", "application/x-www-form-urlencoded"}} {
		d := &Delivery{GUID: "g", Hook: "h", Event: c.event, ContentType: c.ct, Repo: "o/r", Body: []byte(`{"a":1}`),
			Received: time.UnixMilli(5).UTC()}
		rec, _, _, err := encodeRaw(d, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := decodeRaw("g", "h", rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.assemble(nil)
		if err != nil || got.Event != c.event || got.ContentType != c.ct || got.Repo != "o/r" || string(got.Body) != `{"a":1}` {
			t.Fatalf("%+v: decoded as %+v (%v)", c, got, err)
		}
	}
}
