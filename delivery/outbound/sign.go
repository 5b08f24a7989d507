package outbound

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Standard Webhooks headers.
const (
	HeaderID        = "webhook-id"
	HeaderTimestamp = "webhook-timestamp"
	HeaderSignature = "webhook-signature"
)

const secretPrefix = "whsec_"

// NewSecret returns a fresh signing secret: whsec_ and the base64 of 32
// random bytes.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return secretPrefix + base64.StdEncoding.EncodeToString(b)
}

// ParseSecret returns the key bytes of a whsec_ secret: 24 to 64 bytes in
// standard base64.
func ParseSecret(s string) ([]byte, error) {
	rest, ok := strings.CutPrefix(s, secretPrefix)
	if !ok {
		return nil, invalid("secret must start with %s", secretPrefix)
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, invalid("secret is not standard base64 after %s", secretPrefix)
	}
	if len(key) < 24 || len(key) > 64 {
		return nil, invalid("secret must hold 24 to 64 bytes, has %d", len(key))
	}
	return key, nil
}

// MaskSecret shows a secret's kind and last four characters only.
func MaskSecret(s string) string {
	if len(s) < len(secretPrefix)+8 {
		return secretPrefix + "****"
	}
	return secretPrefix + "****" + s[len(s)-4:]
}

// Sign returns the webhook-signature value of one attempt: "v1," and the
// base64 HMAC-SHA256 of "<id>.<unix seconds>.<body>" under key.
func Sign(key []byte, id string, ts time.Time, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write([]byte(strconv.FormatInt(ts.Unix(), 10)))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// SetHeaders puts the Standard Webhooks headers of one attempt on h.
func SetHeaders(h http.Header, key []byte, id string, ts time.Time, body []byte) {
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(ts.Unix(), 10))
	h.Set(HeaderSignature, Sign(key, id, ts, body))
}

// ErrSignature is wrapped by every error Verify returns.
var ErrSignature = errors.New("webhook signature")

// Verify checks a received push the way a Standard Webhooks receiver
// does: the headers present, the timestamp within tolerance of now, and
// one of the space-separated v1 signatures matching the raw body under the
// whsec_ secret, compared in constant time.
func Verify(secret string, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	key, err := ParseSecret(secret)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSignature, err)
	}
	id, tsText, sigs := h.Get(HeaderID), h.Get(HeaderTimestamp), h.Get(HeaderSignature)
	if id == "" || tsText == "" || sigs == "" {
		return fmt.Errorf("%w: missing headers", ErrSignature)
	}
	sec, err := strconv.ParseInt(tsText, 10, 64)
	if err != nil {
		return fmt.Errorf("%w: timestamp %q", ErrSignature, tsText)
	}
	ts := time.Unix(sec, 0)
	if d := now.Sub(ts); d > tolerance || d < -tolerance {
		return fmt.Errorf("%w: timestamp %s outside the tolerance", ErrSignature, tsText)
	}
	want := Sign(key, id, ts, body)
	for _, s := range strings.Fields(sigs) {
		if hmac.Equal([]byte(s), []byte(want)) {
			return nil
		}
	}
	return fmt.Errorf("%w: no matching signature", ErrSignature)
}
