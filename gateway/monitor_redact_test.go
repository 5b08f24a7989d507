package gateway

import (
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	got := redact([]byte(`{"ws":"acme","secret":"whsec_abc","nested":{"Authorization":"Bearer x","list":[{"api_token":"t"}]},"body":"{}"}`))
	for _, leak := range []string{"whsec_abc", "Bearer x", `"t"`} {
		if strings.Contains(got, leak) {
			t.Fatalf("redact leaked %s: %s", leak, got)
		}
	}
	if !strings.Contains(got, `"ws":"acme"`) || strings.Count(got, "[redacted]") != 3 {
		t.Fatalf("redact: %s", got)
	}
	if got := redact([]byte("not json")); strings.Contains(got, "not json") {
		t.Fatalf("a non-JSON payload was shown: %s", got)
	}
}
