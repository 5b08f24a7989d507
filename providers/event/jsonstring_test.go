package event

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzAppendString: AppendString writes what encoding/json writes, with
// and without the HTML escapes.
func FuzzAppendString(f *testing.F) {
	for _, s := range []string{"", "plain", `q"b\s`, "<a&b>", "\b\f\n\r\t\x00\x1f\x7f", "\u2028\u2029", "é\xff\xc3", "日本"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s, true); !bytes.Equal(got, want) {
			t.Fatalf("html: AppendString(%q) = %s, json.Marshal = %s", s, got, want)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want = bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
		if got := AppendString([]byte("x"), s, false); !bytes.Equal(got[1:], want) || got[0] != 'x' {
			t.Fatalf("plain: AppendString(%q) = %s, Encoder = %s", s, got[1:], want)
		}
	})
}
