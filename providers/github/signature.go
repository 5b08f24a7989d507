// Package github turns GitHub webhook deliveries into what wakegate knows
// about them (docs/design.md §3): VerifySignature checks X-Hub-Signature-256 over
// the raw body, Normalize maps a payload to a Fact — the event template and
// the tracker input one delivery carries, before the PR tracker resolves
// subjects and synthesizes ready / checks_failed — and Parse is the
// gateway's one pass: the fields it commits by (Meta) and the Fact, which
// EncodeFact renders for the ingest record.
//
// Everything here is pure: no I/O, no clock, no configuration.
package github

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// ErrSignature is wrapped by every error VerifySignature returns: the
// delivery must be refused (401).
var ErrSignature = errors.New("github: invalid webhook signature")

// signaturePrefix is the only algorithm accepted: SHA-1 (X-Hub-Signature,
// "sha1=") is never enough on its own (docs/design.md §3).
const signaturePrefix = "sha256="

// VerifySignature checks header, the value of X-Hub-Signature-256
// ("sha256=<hex>"), against the HMAC-SHA256 of the raw body under every
// secret in secrets, in constant time; one match is enough (rotation: old and
// new secrets are accepted together). Empty secrets are skipped, so an empty
// configuration never accepts anything. A missing, malformed or wrong
// signature returns an error wrapping ErrSignature whose text names neither
// the secrets nor the signature.
func VerifySignature(header string, body []byte, secrets [][]byte) error {
	if header == "" {
		return fmt.Errorf("%w: missing X-Hub-Signature-256", ErrSignature)
	}
	digest, ok := strings.CutPrefix(header, signaturePrefix)
	if !ok {
		return fmt.Errorf("%w: want a sha256= signature", ErrSignature)
	}
	got, err := hex.DecodeString(digest)
	if err != nil || len(got) != sha256.Size {
		return fmt.Errorf("%w: signature is not a hex SHA-256 digest", ErrSignature)
	}
	configured, match := false, false
	for _, secret := range secrets {
		if len(secret) == 0 {
			continue
		}
		configured = true
		mac := hmac.New(sha256.New, secret)
		mac.Write(body)
		// No early exit: every secret costs the same whichever one matches.
		if hmac.Equal(mac.Sum(nil), got) {
			match = true
		}
	}
	switch {
	case !configured:
		return fmt.Errorf("%w: no secret configured", ErrSignature)
	case !match:
		return fmt.Errorf("%w: signature does not match", ErrSignature)
	}
	return nil
}
