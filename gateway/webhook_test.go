package gateway

import (
	"regexp"
	"testing"
)

// FuzzWebhookTokens holds isDigits to the expression it replaces (the
// GUID and event name are event.ValidID's grammar, fuzzed in its package).
func FuzzWebhookTokens(f *testing.F) {
	digitsRe := regexp.MustCompile(`^[0-9]{1,20}$`)
	for _, s := range []string{"", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "pull_request", "a b", "4242", "012345678901234567890", "é", "x\n", "-", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isDigits(s), digitsRe.MatchString(s); got != want {
			t.Fatalf("isDigits(%q) = %v, regexp says %v", s, got, want)
		}
	})
}
