package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

// GitHub's published test vector
// (https://docs.github.com/en/webhooks/using-webhooks/validating-webhook-deliveries).
const (
	vectorSecret    = "It's a Secret to Everybody"
	vectorPayload   = "Hello, World!"
	vectorSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

func sign(body, secret []byte) string {
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return signaturePrefix + hex.EncodeToString(mac.Sum(nil))
}

func TestVerifySignature(t *testing.T) {
	body := []byte(vectorPayload)
	secret := []byte(vectorSecret)
	other := []byte("the old secret")
	digest := strings.TrimPrefix(vectorSignature, signaturePrefix)

	tests := []struct {
		name    string
		header  string
		secrets [][]byte
		ok      bool
	}{
		{"published vector", vectorSignature, [][]byte{secret}, true},
		{"rotation: second secret matches", vectorSignature, [][]byte{other, secret}, true},
		{"rotation: first secret matches", vectorSignature, [][]byte{secret, other}, true},
		{"empty secrets skipped", vectorSignature, [][]byte{nil, secret}, true},
		{"upper-case hex", signaturePrefix + strings.ToUpper(digest), [][]byte{secret}, true},
		{"wrong secret", vectorSignature, [][]byte{other}, false},
		{"wrong digest", signaturePrefix + strings.Repeat("0", 64), [][]byte{secret}, false},
		{"missing header", "", [][]byte{secret}, false},
		{"missing prefix", digest, [][]byte{secret}, false},
		{"sha1 prefix", "sha1=" + digest, [][]byte{secret}, false},
		{"upper-case prefix", "SHA256=" + digest, [][]byte{secret}, false},
		{"odd hex", vectorSignature[:len(vectorSignature)-1], [][]byte{secret}, false},
		{"not hex", signaturePrefix + strings.Repeat("zz", 32), [][]byte{secret}, false},
		{"truncated digest", vectorSignature[:len(vectorSignature)-2], [][]byte{secret}, false},
		{"digest too long", vectorSignature + "00", [][]byte{secret}, false},
		{"prefix only", signaturePrefix, [][]byte{secret}, false},
		{"no secrets", vectorSignature, nil, false},
		{"only empty secrets", sign(body, nil), [][]byte{nil, {}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := VerifySignature(tt.header, body, tt.secrets)
			if tt.ok {
				if err != nil {
					t.Fatalf("VerifySignature: %v", err)
				}
				return
			}
			if !errors.Is(err, ErrSignature) {
				t.Fatalf("VerifySignature = %v, want an error wrapping ErrSignature", err)
			}
			if msg := err.Error(); strings.Contains(msg, digest[:16]) || strings.Contains(msg, vectorSecret) || strings.Contains(msg, "old secret") {
				t.Errorf("error text leaks the signature or a secret: %q", msg)
			}
		})
	}
}

func TestVerifySignatureBodyChanged(t *testing.T) {
	err := VerifySignature(vectorSignature, []byte(vectorPayload+"\n"), [][]byte{[]byte(vectorSecret)})
	if !errors.Is(err, ErrSignature) {
		t.Fatalf("VerifySignature over a changed body = %v, want ErrSignature", err)
	}
}
