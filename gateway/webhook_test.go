package gateway

import (
	"regexp"
	"testing"
)

// FuzzWebhookTokens holds isToken and isDigits to the expressions they
// replace.
func FuzzWebhookTokens(f *testing.F) {
	tokenRe := regexp.MustCompile(`^[A-Za-z0-9_.-]{1,128}$`)
	digitsRe := regexp.MustCompile(`^[0-9]{1,20}$`)
	for _, s := range []string{"", "72d3162e-cc78-11e3-81ab-4c9367dc0958", "pull_request", "a b", "4242", "012345678901234567890", "é", "x\n", "-", "1e3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isToken(s), tokenRe.MatchString(s); got != want {
			t.Fatalf("isToken(%q) = %v, regexp says %v", s, got, want)
		}
		if got, want := isDigits(s), digitsRe.MatchString(s); got != want {
			t.Fatalf("isDigits(%q) = %v, regexp says %v", s, got, want)
		}
	})
}
