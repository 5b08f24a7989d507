package gateway

import (
	"strings"
	"testing"
)

// TestRedact: the monitor shows the metadata of a payload, never a value
// of any other field, whatever its name, depth or encoding.
func TestRedact(t *testing.T) {
	got := redact([]byte(`{"ws":"acme","party":"human:ops","seq":7,"seqs":[1,2],"secret":"whsec_abc",` +
		`"nested":{"Authorization":"Bearer x","list":[{"api_token":"t"}]},"body":"{\"data\":{\"note\":\"hunter2\"}}",` +
		`"ck":"ghp_leak","kind":"wake","party_extra":{"x":"y"},"reason":["nested-leak"]}`))
	for _, leak := range []string{"whsec_abc", "Bearer x", `"t"`, "hunter2", "ghp_leak", `"y"`, "nested-leak"} {
		if strings.Contains(got, leak) {
			t.Fatalf("redact leaked %s: %s", leak, got)
		}
	}
	for _, shown := range []string{`"ws":"acme"`, `"party":"human:ops"`, `"seq":7`, `"seqs":[1,2]`, `"kind":"wake"`} {
		if !strings.Contains(got, shown) {
			t.Fatalf("redact hid %s: %s", shown, got)
		}
	}
	for _, p := range []string{"not json", `"a string"`, `["hunter2"]`} {
		if got := redact([]byte(p)); strings.Contains(got, "hunter2") || strings.Contains(got, "not json") {
			t.Fatalf("a payload that is not an object was shown: %s", got)
		}
	}
}
