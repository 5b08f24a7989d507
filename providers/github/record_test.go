package github

import (
	"bytes"
	"reflect"
	"testing"

	"github.com/bytedance/sonic"
)

// TestFactRecordRoundTrip: every fixture's fact comes back from its
// ingest-record encoding exactly as Normalize made it, so the deriver
// folds in the same fact whichever way it got it.
func TestFactRecordRoundTrip(t *testing.T) {
	n := 0
	for _, fx := range fixtures(t) {
		f, err := Normalize(fx.event, fx.body)
		if err != nil || f.Ignored != "" {
			continue
		}
		b, err := EncodeFact(&f)
		if err != nil {
			t.Fatalf("%s: %v", fx.path, err)
		}
		got, err := DecodeFact(b)
		if err != nil {
			t.Fatalf("%s: %v", fx.path, err)
		}
		if !reflect.DeepEqual(*got, f) {
			t.Errorf("%s: round trip changed the fact:\n got %+v\nwant %+v", fx.path, *got, f)
		}
		n++
	}
	if n < 20 {
		t.Fatalf("only %d fixtures normalized to a fact", n)
	}
	if _, err := DecodeFact([]byte(`{"Event":`)); err == nil {
		t.Error("a truncated record decoded")
	}
}

// TestEncodeFactAsStd: EncodeFact writes every fixture's fact byte for
// byte as sonic.ConfigStd did (what records already committed hold).
func TestEncodeFactAsStd(t *testing.T) {
	n := 0
	for _, fx := range fixtures(t) {
		f, err := Normalize(fx.event, fx.body)
		if err != nil || f.Ignored != "" {
			continue
		}
		got, err := EncodeFact(&f)
		if err != nil {
			t.Fatalf("%s: %v", fx.path, err)
		}
		want, err := sonic.ConfigStd.Marshal(&f)
		if err != nil {
			t.Fatalf("%s: %v", fx.path, err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: EncodeFact\n%s\nConfigStd\n%s", fx.path, got, want)
		}
		n++
	}
	if n < 20 {
		t.Fatalf("only %d fixtures normalized to a fact", n)
	}
}
