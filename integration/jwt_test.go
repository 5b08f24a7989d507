package integration

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

func jwtDate(t time.Time) *jwt.NumericDate { return jwt.NewNumericDate(t) }

// claims are valid claims for sub in ws with scope; tests break one field.
func claims(sub, ws, scope string) jwt.MapClaims {
	now := time.Now()
	return jwt.MapClaims{
		"sub": sub, "ws": ws, "scope": scope, "aud": "wakegate",
		"iat": now.Unix(), "exp": now.Add(time.Hour).Unix(),
	}
}

// signHS256 signs claims with HS256 under key, whatever the key is.
func signHS256(t testing.TB, key []byte, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// signNone is an unsigned token: alg "none", empty signature.
func signNone(t testing.TB, c jwt.MapClaims) string {
	t.Helper()
	s, err := jwt.NewWithClaims(jwt.SigningMethodNone, c).SignedString(jwt.UnsafeAllowNoneSignatureType)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// rsaKey is an RSA key pair whose public half is configured as a JWT key.
type rsaKey struct {
	priv *rsa.PrivateKey
	pem  string // PUBLIC KEY PEM, exactly as configured
	kid  string // RFC 7638 thumbprint, base64url
}

func newRSAKey(t testing.TB) *rsaKey {
	t.Helper()
	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	p := string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
	b64 := base64.RawURLEncoding.EncodeToString
	e := big.NewInt(int64(priv.PublicKey.E)).Bytes()
	tp := sha256.Sum256([]byte(`{"e":"` + b64(e) + `","kty":"RSA","n":"` + b64(priv.PublicKey.N.Bytes()) + `"}`))
	return &rsaKey{priv: priv, pem: p, kid: b64(tp[:])}
}

// signRS256 signs claims with the private key, naming it by kid.
func (k *rsaKey) signRS256(t testing.TB, c jwt.MapClaims) string {
	t.Helper()
	tok := jwt.NewWithClaims(jwt.SigningMethodRS256, c)
	tok.Header["kid"] = k.kid
	s, err := tok.SignedString(k.priv)
	if err != nil {
		t.Fatal(err)
	}
	return s
}
