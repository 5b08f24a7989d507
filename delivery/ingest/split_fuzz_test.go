package ingest

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzRawRoundTrip: whatever the body — JSON or not, well formed or not —
// its record decodes, with its objects put back, to the body byte for
// byte (docs/design.md §14), and decoding never panics.
func FuzzRawRoundTrip(f *testing.F) {
	files, _ := filepath.Glob("../../testdata/github/octokit/*/*.json")
	for _, p := range files[:min(len(files), 12)] {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	f.Add([]byte(`{"repository":{"a":"` + string(bytes.Repeat([]byte("x"), 300)) + `"},"sender":{"b":"\"}{"}}`))
	f.Add([]byte(`payload=%7B%7D`))
	f.Add([]byte(`{"assignees":[{"login":"` + string(bytes.Repeat([]byte("y"), 300)) + `"}, 1, "s"]}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		d := &Delivery{GUID: "g", Hook: "h", Event: "e", Body: body, Received: time.UnixMilli(1)}
		rec, objs, _, err := encodeRaw(d, nil)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[[objHashLen]byte][]byte{}
		for _, o := range objs {
			data, err := decodeObject(o.sum, encodeObject(o.data))
			if err != nil {
				t.Fatal(err)
			}
			stored[o.sum] = data
		}
		r, err := decodeRaw("g", "h", rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.assemble(stored)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Body, body) {
			t.Fatalf("body of %d bytes came back as %d bytes", len(body), len(got.Body))
		}
		// a truncated record is an error, never a panic
		for _, n := range []int{1, 3, len(rec) / 2, len(rec) - 1} {
			if n > 0 && n < len(rec) {
				_, _ = decodeRaw("g", "h", rec[:n])
			}
		}
	})
}

// TestRawRoundTripMutated runs FuzzRawRoundTrip's property over
// pseudo-random mutations of the fixtures (bytes flipped, cut, repeated),
// so every test run covers malformed bodies too.
func TestRawRoundTripMutated(t *testing.T) {
	files, _ := filepath.Glob("../../testdata/github/octokit/*/*.json")
	if len(files) == 0 {
		t.Fatal("no fixtures")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	special := []byte(`{}[]",:\ `)
	for i := range 1500 {
		body, err := os.ReadFile(files[i%len(files)])
		if err != nil {
			t.Fatal(err)
		}
		switch i % 3 {
		case 0:
			for range 1 + rng.IntN(4) {
				body[rng.IntN(len(body))] = special[rng.IntN(len(special))]
			}
		case 1:
			body = body[:rng.IntN(len(body))]
		default:
			a, b := rng.IntN(len(body)), rng.IntN(len(body))
			body = append(body[:min(a, b)], body[max(a, b):]...)
		}
		d := &Delivery{GUID: "g", Hook: "h", Event: "e", Body: body, Received: time.UnixMilli(1)}
		rec, objs, _, err := encodeRaw(d, nil)
		if err != nil {
			t.Fatal(err)
		}
		stored := map[[objHashLen]byte][]byte{}
		for _, o := range objs {
			stored[o.sum] = o.data
		}
		r, err := decodeRaw("g", "h", rec)
		if err != nil {
			t.Fatal(err)
		}
		got, err := r.assemble(stored)
		if err != nil || !bytes.Equal(got.Body, body) {
			t.Fatalf("mutation %d of %s: %v, body of %d bytes came back as %d", i, files[i%len(files)], err, len(body), len(got.Body))
		}
	}
}
