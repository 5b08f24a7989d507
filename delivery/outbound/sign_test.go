package outbound

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestSignSpecVector: the example of the Standard Webhooks specification
// (standard-webhooks/standard-webhooks, spec/standard-webhooks.md).
func TestSignSpecVector(t *testing.T) {
	secret := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	key, err := ParseSecret(secret)
	if err != nil {
		t.Fatal(err)
	}
	ts := time.Unix(1614265330, 0)
	body := []byte(`{"test": 2432232314}`)
	const want = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
	if got := Sign(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", ts, body); got != want {
		t.Fatalf("Sign = %s, want %s", got, want)
	}
	h := http.Header{}
	SetHeaders(h, key, "msg_p5jXN8AQM9LWM0D4loKWxJek", ts, body)
	if err := Verify(secret, h, body, ts.Add(time.Minute), 5*time.Minute); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	// Rotation: several signatures, one matching.
	h.Set(HeaderSignature, "v1,bm90IGl0 "+want)
	if err := Verify(secret, h, body, ts, 5*time.Minute); err != nil {
		t.Fatalf("Verify with two signatures: %v", err)
	}
	for name, tamper := range map[string]func(h http.Header) ([]byte, time.Time){
		"body":      func(http.Header) ([]byte, time.Time) { return []byte(`{"test": 2432232315}`), ts },
		"id":        func(h http.Header) ([]byte, time.Time) { h.Set(HeaderID, "msg_other"); return body, ts },
		"old":       func(http.Header) ([]byte, time.Time) { return body, ts.Add(10 * time.Minute) },
		"no header": func(h http.Header) ([]byte, time.Time) { h.Del(HeaderSignature); return body, ts },
	} {
		h := http.Header{}
		SetHeaders(h, key, "msg_p5jXN8AQM9LWM0D4loKWxJek", ts, body)
		b, now := tamper(h)
		if err := Verify(secret, h, b, now, 5*time.Minute); !errors.Is(err, ErrSignature) {
			t.Errorf("%s: Verify = %v, want a signature error", name, err)
		}
	}
}

func TestSecrets(t *testing.T) {
	s := NewSecret()
	key, err := ParseSecret(s)
	if err != nil || len(key) != 32 || !strings.HasPrefix(s, "whsec_") {
		t.Fatalf("NewSecret %q: %d bytes, %v", s, len(key), err)
	}
	if NewSecret() == s {
		t.Fatal("two equal secrets")
	}
	if m := MaskSecret(s); !strings.HasPrefix(m, "whsec_****") || strings.Contains(m, s[6:20]) || len(m) != len("whsec_****")+4 {
		t.Fatalf("MaskSecret = %q", m)
	}
	for _, bad := range []string{"", "secret", "whsec_", "whsec_!!!!", "whsec_" + strings.Repeat("A", 20), "whsec_" + strings.Repeat("A", 100)} {
		if _, err := ParseSecret(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseSecret(%q) = %v, want invalid", bad, err)
		}
	}
}
