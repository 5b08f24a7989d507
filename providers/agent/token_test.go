package agent

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// tokNow is the fixed clock of most tests.
var tokNow = time.Unix(1_800_000_000, 0)

func tokClock() time.Time { return tokNow }

var tokSecret = []byte("0123456789abcdef0123456789abcdef-test-secret")

// tokKeyset keys are generated once per test binary.
type tokKeyset struct {
	rsa *rsa.PrivateKey
	ec  *ecdsa.PrivateKey
	ed  ed25519.PrivateKey
}

var tokKeys = sync.OnceValue(func() tokKeyset {
	r, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		panic(err)
	}
	e, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic(err)
	}
	_, d, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	return tokKeyset{r, e, d}
})

// tokSigner is one asymmetric test key: how to sign with it and its public half.
type tokSigner struct {
	name   string
	method jwt.SigningMethod
	priv   crypto.Signer
}

func tokSigners() []tokSigner {
	k := tokKeys()
	return []tokSigner{
		{"rsa", jwt.SigningMethodRS256, k.rsa},
		{"ec", jwt.SigningMethodES256, k.ec},
		{"ed25519", jwt.SigningMethodEdDSA, k.ed},
	}
}

func tokPEM(t testing.TB, pub crypto.PublicKey) string {
	t.Helper()
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))
}

// tokJWK encodes pub as a JWK; empty kid or alg are left out.
func tokJWK(t testing.TB, pub crypto.PublicKey, kid, alg string) map[string]any {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	m := map[string]any{}
	switch k := pub.(type) {
	case *rsa.PublicKey:
		m["kty"], m["n"], m["e"] = "RSA", enc(k.N.Bytes()), enc(big.NewInt(int64(k.E)).Bytes())
	case *ecdsa.PublicKey:
		b, err := k.Bytes()
		if err != nil {
			t.Fatal(err)
		}
		m["kty"], m["crv"], m["x"], m["y"] = "EC", "P-256", enc(b[1:33]), enc(b[33:])
	case ed25519.PublicKey:
		m["kty"], m["crv"], m["x"] = "OKP", "Ed25519", enc(k)
	default:
		t.Fatalf("jwkOf %T", pub)
	}
	if kid != "" {
		m["kid"] = kid
	}
	if alg != "" {
		m["alg"] = alg
	}
	return m
}

func tokJWKS(t testing.TB, ks ...map[string]any) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"keys": ks})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func tokThumb(t testing.TB, pub crypto.PublicKey) string {
	t.Helper()
	kid, err := thumbprint(pub)
	if err != nil {
		t.Fatal(err)
	}
	return kid
}

// tokClaims returns valid claims at tokNow.
func tokClaims() Claims {
	return Claims{
		Workspace: "default",
		Scope:     "events:push inbox",
		RegisteredClaims: jwt.RegisteredClaims{
			Subject:   "session:abc",
			Audience:  jwt.ClaimStrings{"wakegate"},
			IssuedAt:  jwt.NewNumericDate(tokNow),
			ExpiresAt: jwt.NewNumericDate(tokNow.Add(time.Hour)),
		},
	}
}

// tokSign signs claims with method and key, setting kid when non-empty.
func tokSign(t testing.TB, method jwt.SigningMethod, key any, kid string, claims jwt.Claims) string {
	t.Helper()
	tok := jwt.NewWithClaims(method, claims)
	if kid != "" {
		tok.Header["kid"] = kid
	}
	s, err := tok.SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func tokHS(t testing.TB, c jwt.Claims) string {
	return tokSign(t, jwt.SigningMethodHS256, tokSecret, "", c)
}

func tokVerifier(t testing.TB, cfg VerifierConfig) *Verifier {
	t.Helper()
	if cfg.Now == nil {
		cfg.Now = tokClock
	}
	v, err := NewVerifier(cfg)
	if err != nil {
		t.Fatalf("NewVerifier: %v", err)
	}
	return v
}

func tokVerify(t testing.TB, v *Verifier, tok string) *Claims {
	t.Helper()
	c, err := v.Verify(tok)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	return c
}

// tokRefuse asserts tok is refused for reason (a substring of the message).
func tokRefuse(t testing.TB, v *Verifier, tok, reason string) {
	t.Helper()
	c, err := v.Verify(tok)
	if err == nil {
		t.Fatalf("Verify accepted a token that should fail with %q: %+v", reason, c)
	}
	if c != nil {
		t.Errorf("Verify returned claims with error %v", err)
	}
	if !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("error %v does not wrap ErrUnauthenticated", err)
	}
	if !strings.Contains(err.Error(), reason) {
		t.Errorf("error %q, want it to say %q", err, reason)
	}
}

func TestVerifyHS256(t *testing.T) {
	v := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret})
	c := tokVerify(t, v, tokHS(t, tokClaims()))
	if c.Party() != "session:abc" || c.Workspace != "default" || !c.Has("inbox") {
		t.Errorf("claims = %+v", c)
	}
	tokRefuse(t, v, tokSign(t, jwt.SigningMethodHS256, []byte("another secret of enough length!!"), "", tokClaims()), "invalid signature")
	// An HS256 token's kid is ignored: the secret is its only key.
	tokVerify(t, v, tokSign(t, jwt.SigningMethodHS256, tokSecret, "whatever", tokClaims()))
}

// Every key type verifies in every input form: PEM (kid = thumbprint), JWKS
// with kid and alg, JWKS without alg (inferred), JWKS without kid
// (thumbprint).
func TestVerifyPublicKeyForms(t *testing.T) {
	for _, s := range tokSigners() {
		pub := s.priv.Public()
		thumb := tokThumb(t, pub)
		forms := []struct {
			name, keys, kid string
		}{
			{"pem", tokPEM(t, pub), thumb},
			{"jwks", tokJWKS(t, tokJWK(t, pub, "k1", s.method.Alg())), "k1"},
			{"jwks-no-alg", tokJWKS(t, tokJWK(t, pub, "k1", "")), "k1"},
			{"jwks-no-kid", tokJWKS(t, tokJWK(t, pub, "", s.method.Alg())), thumb},
		}
		for _, f := range forms {
			t.Run(s.name+"/"+f.name, func(t *testing.T) {
				v := tokVerifier(t, VerifierConfig{PublicKeys: f.keys, HS256Secret: tokSecret})
				c := tokVerify(t, v, tokSign(t, s.method, s.priv, f.kid, tokClaims()))
				if c.Subject != "session:abc" {
					t.Errorf("sub = %q", c.Subject)
				}
			})
		}
	}
}

// All three PEM keys in one value, plus PKCS #1 "RSA PUBLIC KEY".
func TestVerifyPEMBundle(t *testing.T) {
	k := tokKeys()
	pkcs1 := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.rsa.PublicKey)}))
	bundle := pkcs1 + "\n" + tokPEM(t, k.ec.Public()) + tokPEM(t, k.ed.Public())
	v := tokVerifier(t, VerifierConfig{PublicKeys: bundle})
	for _, s := range tokSigners() {
		tokVerify(t, v, tokSign(t, s.method, s.priv, tokThumb(t, s.priv.Public()), tokClaims()))
	}
}

// RFC 7638 §3.1's example key and thumbprint.
func TestThumbprintRFC7638(t *testing.T) {
	n := "0vx7agoebGcQSuuPiLJXZptN9nndrQmbXEps2aiAFbWhM78LhWx4cbbfAAtVT86zwu1RK7aPFFxuhDR1L6tSoc_BJECPebWKRXjBZCiFV4n3oknjhMstn64tZ_2W-5JsGY4Hc5n9yBXArwl93lqt7_RN5w6Cf0h4QyQ5v-65YGjQR0_FDW2QvzqY368QQMicAtaSqzs8KJZgnYb9c7d0zgdAZHzu6qMQvRL5hajrn1n91CbOpbISD08qNLyrdkt-bFTWhAI4vMQFh6WeZu0fM4lFd2NcRwr3XPksINHaQ-G_xBniIqbw0Ls1jF44-csFCur-kEgU8awapJzKnqDKgw"
	pub, err := jwkRSA(n, "AQAB")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := tokThumb(t, pub), "NzbLsXh8uDCcd-6MNwXF4W_7noWXFZAfHkxZsRGC9Xs"; got != want {
		t.Errorf("thumbprint = %s, want %s", got, want)
	}
}

// An HS256 token verifies only with the HS256 secret: never with a public
// key, and not at all when no secret is configured.
func TestHS256OnlyWithSecret(t *testing.T) {
	k := tokKeys()
	v := tokVerifier(t, VerifierConfig{PublicKeys: tokPEM(t, k.rsa.Public())})
	tokRefuse(t, v, tokHS(t, tokClaims()), "hs256 tokens not accepted")
}

// The token's alg must be the one its key is pinned to. PS256 and RS384 are
// valid signatures by the very RSA key (the plain library accepts them),
// ES256 under the RSA key's kid is another key's token.
func TestAlgorithmPinnedToKey(t *testing.T) {
	k := tokKeys()
	v := tokVerifier(t, VerifierConfig{PublicKeys: tokJWKS(t,
		tokJWK(t, k.rsa.Public(), "rsa", ""),
		tokJWK(t, k.ec.Public(), "ec", ""),
		tokJWK(t, k.ed.Public(), "ed", ""),
	)})
	pss := tokSign(t, jwt.SigningMethodPS256, k.rsa, "rsa", tokClaims())
	rs384 := tokSign(t, jwt.SigningMethodRS384, k.rsa, "rsa", tokClaims())
	for _, tok := range []string{pss, rs384} {
		if _, err := jwt.Parse(tok, func(*jwt.Token) (any, error) { return k.rsa.Public(), nil }); err != nil {
			t.Fatalf("sanity: unpinned parse refuses the token: %v", err)
		}
		tokRefuse(t, v, tok, "algorithm not accepted")
	}
	tokRefuse(t, v, tokSign(t, jwt.SigningMethodES256, k.ec, "rsa", tokClaims()), "algorithm does not match key")
	tokRefuse(t, v, tokSign(t, jwt.SigningMethodRS256, k.rsa, "ec", tokClaims()), "algorithm does not match key")
	tokRefuse(t, v, tokSign(t, jwt.SigningMethodEdDSA, k.ed, "rsa", tokClaims()), "algorithm does not match key")
	// Right alg, right kid, but signed by another key.
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tokRefuse(t, v, tokSign(t, jwt.SigningMethodES256, other, "ec", tokClaims()), "invalid signature")
}

// An asymmetric token names its key by kid, except when exactly one public
// key and no HS256 secret are configured.
func TestKidRequired(t *testing.T) {
	k := tokKeys()
	rsaPEM := tokPEM(t, k.rsa.Public())
	noKid := tokSign(t, jwt.SigningMethodRS256, k.rsa, "", tokClaims())

	two := tokVerifier(t, VerifierConfig{PublicKeys: rsaPEM + tokPEM(t, k.ec.Public())})
	tokRefuse(t, two, noKid, "missing kid")
	tokRefuse(t, two, tokSign(t, jwt.SigningMethodRS256, k.rsa, "nope", tokClaims()), "unknown kid")

	withSecret := tokVerifier(t, VerifierConfig{PublicKeys: rsaPEM, HS256Secret: tokSecret})
	tokRefuse(t, withSecret, noKid, "missing kid")

	only := tokVerifier(t, VerifierConfig{PublicKeys: rsaPEM})
	tokVerify(t, only, noKid)
	tokRefuse(t, only, tokSign(t, jwt.SigningMethodRS256, k.rsa, "nope", tokClaims()), "unknown kid")
	tokRefuse(t, only, tokSign(t, jwt.SigningMethodES256, k.ec, "", tokClaims()), "algorithm does not match key")
}

func tokNone(t testing.TB, kid string) string {
	t.Helper()
	return tokSign(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, kid, tokClaims())
}

func TestAlgNoneRefused(t *testing.T) {
	k := tokKeys()
	hsOnly := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret})
	single := tokVerifier(t, VerifierConfig{PublicKeys: tokPEM(t, k.ed.Public())})
	kid := tokThumb(t, k.ed.Public())
	enc := base64.RawURLEncoding.EncodeToString
	body := strings.Split(tokHS(t, tokClaims()), ".")[1]
	for _, tok := range []string{
		tokNone(t, ""),
		tokNone(t, kid),
		enc([]byte(`{"alg":"None","typ":"JWT"}`)) + "." + body + ".",
		enc([]byte(`{"alg":"NONE","kid":"`+kid+`"}`)) + "." + body + ".",
		enc([]byte(`{"typ":"JWT"}`)) + "." + body + ".",
	} {
		for _, v := range []*Verifier{hsOnly, single} {
			_, err := v.Verify(tok)
			if !errors.Is(err, ErrUnauthenticated) {
				t.Errorf("Verify(none token) = %v, want refusal", err)
			}
		}
	}
	tokRefuse(t, hsOnly, tokNone(t, ""), "algorithm not accepted")
}

// The classic confusion attack: an HS256 token whose HMAC key is the RSA
// public key's PEM, naming the RSA key by kid (or not).
func TestKeyConfusionRefused(t *testing.T) {
	k := tokKeys()
	pemText := tokPEM(t, k.rsa.Public())
	kid := tokThumb(t, k.rsa.Public())
	for _, cfg := range []VerifierConfig{
		{PublicKeys: pemText},
		{PublicKeys: pemText, HS256Secret: tokSecret},
		{PublicKeys: tokJWKS(t, tokJWK(t, k.rsa.Public(), kid, "RS256"))},
	} {
		v := tokVerifier(t, cfg)
		for _, hmacKey := range []string{pemText, strings.TrimSpace(pemText)} {
			for _, tokKid := range []string{kid, ""} {
				tok := tokSign(t, jwt.SigningMethodHS256, []byte(hmacKey), tokKid, tokClaims())
				_, err := v.Verify(tok)
				if !errors.Is(err, ErrUnauthenticated) {
					t.Errorf("confusion token accepted (cfg has secret %v, kid %q): %v", cfg.HS256Secret != nil, tokKid, err)
				}
			}
		}
	}
}

func TestExpRequired(t *testing.T) {
	v := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret})
	c := tokClaims()
	c.ExpiresAt = nil
	tokRefuse(t, v, tokHS(t, c), "missing exp")
}

func TestAudience(t *testing.T) {
	v := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret})
	c := tokClaims()
	c.Audience = nil
	tokRefuse(t, v, tokHS(t, c), "missing aud")
	c.Audience = jwt.ClaimStrings{"other"}
	tokRefuse(t, v, tokHS(t, c), "wrong audience")
	c.Audience = jwt.ClaimStrings{"other", "wakegate"}
	tokVerify(t, v, tokHS(t, c))
}

func TestIssuer(t *testing.T) {
	c := tokClaims()
	open := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret})
	tokVerify(t, open, tokHS(t, c))
	v := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret, Issuer: "https://idp.example"})
	tokRefuse(t, v, tokHS(t, c), "missing iss")
	c.Issuer = "https://evil.example"
	tokVerify(t, open, tokHS(t, c))
	tokRefuse(t, v, tokHS(t, c), "wrong issuer")
	c.Issuer = "https://idp.example"
	tokVerify(t, v, tokHS(t, c))
}

// exp, nbf and iat have 30 s of leeway, and no more.
func TestTimes(t *testing.T) {
	v := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret})
	at := func(d time.Duration) *jwt.NumericDate { return jwt.NewNumericDate(tokNow.Add(d)) }
	cases := []struct {
		name   string
		edit   func(*Claims)
		reason string // "" accepted
	}{
		{"expired", func(c *Claims) { c.ExpiresAt = at(-31 * time.Second) }, "token expired"},
		{"expired within leeway", func(c *Claims) { c.ExpiresAt = at(-29 * time.Second) }, ""},
		{"nbf future", func(c *Claims) { c.NotBefore = at(31 * time.Second) }, "token not valid yet"},
		{"nbf within leeway", func(c *Claims) { c.NotBefore = at(29 * time.Second) }, ""},
		{"iat future", func(c *Claims) { c.IssuedAt = at(31 * time.Second) }, "token not valid yet"},
		{"iat within leeway", func(c *Claims) { c.IssuedAt = at(29 * time.Second) }, ""},
		{"no iat", func(c *Claims) { c.IssuedAt = nil }, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := tokClaims()
			tc.edit(&c)
			if tc.reason == "" {
				tokVerify(t, v, tokHS(t, c))
			} else {
				tokRefuse(t, v, tokHS(t, c), tc.reason)
			}
		})
	}
	// Without Now the real clock is used: a token valid at the fixed clock
	// has expired long ago or is far in the future.
	real := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret, Now: time.Now})
	c := tokClaims()
	c.IssuedAt = jwt.NewNumericDate(time.Now().Add(-2 * time.Hour))
	c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(-time.Hour))
	tokRefuse(t, real, tokHS(t, c), "token expired")
}

func TestSubAndWorkspace(t *testing.T) {
	v := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret})
	for _, sub := range []string{"", "abc", "session:", "robot:x", "session:a/b", "human:" + strings.Repeat("x", 129)} {
		c := tokClaims()
		c.Subject = sub
		tokRefuse(t, v, tokHS(t, c), "sub is not a party")
	}
	for _, ws := range []string{"", "a b", "../x", strings.Repeat("w", 129)} {
		c := tokClaims()
		c.Workspace = ws
		tokRefuse(t, v, tokHS(t, c), "invalid ws")
	}
	c := tokClaims()
	c.Subject, c.Workspace = "human:ops", "team-1.prod"
	if got := tokVerify(t, v, tokHS(t, c)); got.Party() != "human:ops" || got.Workspace != "team-1.prod" {
		t.Errorf("claims = %+v", got)
	}
}

func TestCritAndLengthRefused(t *testing.T) {
	v := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret})
	tok := jwt.NewWithClaims(jwt.SigningMethodHS256, tokClaims())
	tok.Header["crit"] = []string{"exp"}
	s, err := tok.SignedString(tokSecret)
	if err != nil {
		t.Fatal(err)
	}
	tokRefuse(t, v, s, "unsupported crit header")

	c := tokClaims()
	c.Scope = strings.Repeat("inbox ", 2000)
	tokRefuse(t, v, tokHS(t, c), "token too long")
}

// Verify's errors are short, lowercase, and quote neither the token, the
// secret nor any key; NewVerifier's never quote the secret or key material.
func TestErrorMessagesLeakNothing(t *testing.T) {
	k := tokKeys()
	pemText := tokPEM(t, k.rsa.Public())
	v := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret, PublicKeys: pemText, Issuer: "https://idp.example"})
	expired := tokClaims()
	expired.ExpiresAt = jwt.NewNumericDate(tokNow.Add(-time.Hour))
	toks := []string{
		"", "garbage", "a.b.c", "a.b.c.d",
		tokHS(t, tokClaims()), // missing iss
		tokHS(t, expired),
		tokSign(t, jwt.SigningMethodHS256, []byte(pemText), "", tokClaims()),
		tokSign(t, jwt.SigningMethodRS256, k.rsa, "", tokClaims()),
		tokSign(t, jwt.SigningMethodRS256, k.rsa, "kid-"+string(tokSecret), tokClaims()),
		tokNone(t, ""),
	}
	forbidden := []string{string(tokSecret), base64.RawURLEncoding.EncodeToString(tokSecret), pemText,
		base64.RawURLEncoding.EncodeToString(k.rsa.N.Bytes())[:16]}
	for _, tok := range toks {
		_, err := v.Verify(tok)
		if !errors.Is(err, ErrUnauthenticated) {
			t.Fatalf("Verify(%.20q) = %v, want ErrUnauthenticated", tok, err)
		}
		msg := err.Error()
		if msg != strings.ToLower(msg) || len(msg) > 60 {
			t.Errorf("message %q is not short and lowercase", msg)
		}
		parts := append(strings.Split(tok, "."), forbidden...)
		for _, p := range parts {
			if len(p) >= 8 && strings.Contains(msg, p) {
				t.Errorf("message %q leaks %.20q", msg, p)
			}
		}
	}

	// Configuration errors: a corrupted PEM, a private key, a bad JWK.
	der, _ := x509.MarshalPKCS8PrivateKey(k.rsa)
	privPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	corrupt := strings.Replace(pemText, "MII", "MIX", 1)
	badJWK := tokJWK(t, k.rsa.Public(), "k", "")
	badJWK["n"] = badJWK["n"].(string)[:40] + "!!"
	privJWK := tokJWK(t, k.ed.Public(), "k", "")
	privJWK["d"] = base64.RawURLEncoding.EncodeToString(k.ed.Seed())
	for _, pk := range []string{corrupt, privPEM, tokJWKS(t, badJWK), tokJWKS(t, privJWK), pemText + "trailing junk " + string(tokSecret)} {
		_, err := NewVerifier(VerifierConfig{HS256Secret: tokSecret, PublicKeys: pk})
		if err == nil {
			t.Fatalf("NewVerifier accepted bad keys %.40q", pk)
		}
		msg := err.Error()
		if msg[:1] != strings.ToLower(msg[:1]) {
			t.Errorf("message %q does not start lowercase", msg)
		}
		leaks := append([]string{privJWK["d"].(string), badJWK["n"].(string)[:40]}, forbidden...)
		for _, line := range strings.Split(pk, "\n") {
			if len(line) >= 16 {
				leaks = append(leaks, line[:16])
			}
		}
		for _, l := range leaks {
			if strings.Contains(msg, l) {
				t.Errorf("message %q leaks %.20q", msg, l)
			}
		}
	}
}

func TestNewVerifierErrors(t *testing.T) {
	k := tokKeys()
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p384, _ := ecdsa.GenerateKey(elliptic.P384(), rand.Reader)
	rsaJWK := tokJWK(t, k.rsa.Public(), "dup", "")
	cases := []struct {
		name string
		cfg  VerifierConfig
		want string
	}{
		{"nothing", VerifierConfig{}, "no jwt verification key"},
		{"blank keys", VerifierConfig{PublicKeys: " \n "}, "no jwt verification key"},
		{"garbage", VerifierConfig{PublicKeys: "not a key"}, "neither a jwks document nor pem"},
		{"bad json", VerifierConfig{PublicKeys: `{"keys":[`}, "not a valid json document"},
		{"empty jwks", VerifierConfig{PublicKeys: `{"keys":[]}`}, "no keys"},
		{"small rsa pem", VerifierConfig{PublicKeys: tokPEM(t, small.Public())}, "pem block 1: rsa key of 1024 bits"},
		{"small rsa jwk", VerifierConfig{PublicKeys: tokJWKS(t, tokJWK(t, small.Public(), "s", ""))}, `jwks key 1 (kid "s"): rsa key of 1024 bits`},
		{"p-384 pem", VerifierConfig{PublicKeys: tokPEM(t, p384.Public())}, "unsupported ec curve"},
		{"p-384 jwk", VerifierConfig{PublicKeys: `{"keys":[{"kty":"EC","crv":"P-384","x":"AA","y":"AA"}]}`}, `unsupported crv "P-384"`},
		{"oct jwk", VerifierConfig{PublicKeys: `{"keys":[{"kty":"oct","k":"AAAA"}]}`}, `unsupported kty "oct"`},
		{"alg mismatch", VerifierConfig{PublicKeys: tokJWKS(t, tokJWK(t, k.rsa.Public(), "r", "HS256"))}, `alg "HS256" does not fit the key`},
		{"ec alg mismatch", VerifierConfig{PublicKeys: tokJWKS(t, tokJWK(t, k.ec.Public(), "e", "ES384"))}, `alg "ES384" does not fit`},
		{"ec off curve", VerifierConfig{PublicKeys: `{"keys":[{"kty":"EC","crv":"P-256","x":"` + strings.Repeat("A", 43) + `","y":"` + strings.Repeat("A", 42) + `E"}]}`}, "not on p-256"},
		{"duplicate kid", VerifierConfig{PublicKeys: tokJWKS(t, rsaJWK, rsaJWK)}, `duplicate kid "dup"`},
		{"duplicate pem", VerifierConfig{PublicKeys: tokPEM(t, k.ed.Public()) + tokPEM(t, k.ed.Public())}, "duplicate kid"},
		{"second block bad", VerifierConfig{PublicKeys: tokPEM(t, k.ed.Public()) + "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n"}, "pem block 2: unparsable key"},
		{"private pem", VerifierConfig{PublicKeys: "-----BEGIN EC PRIVATE KEY-----\nAAAA\n-----END EC PRIVATE KEY-----\n"}, "private key"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewVerifier(tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("NewVerifier = %v, want error containing %q", err, tc.want)
			}
		})
	}
	// Encryption keys are skipped, not refused.
	enc := tokJWK(t, k.ec.Public(), "enc", "")
	enc["use"] = "enc"
	enc["alg"] = "ECDH-ES"
	v := tokVerifier(t, VerifierConfig{PublicKeys: tokJWKS(t, enc, tokJWK(t, k.ed.Public(), "sig", ""))})
	tokVerify(t, v, tokSign(t, jwt.SigningMethodEdDSA, k.ed, "", tokClaims())) // the only key
	tokRefuse(t, v, tokSign(t, jwt.SigningMethodES256, k.ec, "enc", tokClaims()), "unknown kid")
}

func TestClaimsScopes(t *testing.T) {
	c := &Claims{Scope: "  operator events:push:any\tinbox "}
	if got := c.Scopes(); strings.Join(got, ",") != "operator,events:push:any,inbox" {
		t.Errorf("Scopes = %q", got)
	}
	for scope, want := range map[string]bool{
		"operator": true, "inbox": true, "events:push:any": true,
		"admin": false, "events:push": false, "events": false, "": false, "inbox ": false,
	} {
		if c.Has(scope) != want {
			t.Errorf("Has(%q) = %v, want %v", scope, !want, want)
		}
	}
	if len((&Claims{}).Scopes()) != 0 || (&Claims{}).Has("") {
		t.Error("empty scope should have no scopes")
	}
	if p := (&Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "bogus"}}).Party(); p != "" {
		t.Errorf("Party of bad sub = %q", p)
	}
}

func TestMint(t *testing.T) {
	c := tokClaims()
	c.Audience = jwt.ClaimStrings{"someone-else"}
	c.IssuedAt = nil
	before := time.Now().Add(-time.Second)
	tok, err := Mint(tokSecret, c)
	if err != nil {
		t.Fatal(err)
	}
	v := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret, Now: func() time.Time { return tokNow.Add(-time.Hour) }})
	got := tokVerify(t, v, tok)
	if len(got.Audience) != 1 || got.Audience[0] != "wakegate" {
		t.Errorf("aud = %q", got.Audience)
	}
	if got.IssuedAt == nil || got.IssuedAt.Before(before) {
		t.Errorf("iat = %v", got.IssuedAt)
	}
	if got.Scope != c.Scope || got.Subject != c.Subject || got.Workspace != c.Workspace {
		t.Errorf("claims = %+v", got)
	}
	h, _ := base64.RawURLEncoding.DecodeString(strings.Split(tok, ".")[0])
	if !strings.Contains(string(h), `"alg":"HS256"`) {
		t.Errorf("header = %s", h)
	}

	noExp := tokClaims()
	noExp.ExpiresAt = nil
	badSub := tokClaims()
	badSub.Subject = "abc"
	badWS := tokClaims()
	badWS.Workspace = "a/b"
	for name, tc := range map[string]struct {
		secret []byte
		c      Claims
	}{
		"no secret": {nil, tokClaims()}, "no exp": {tokSecret, noExp}, "bad sub": {tokSecret, badSub}, "bad ws": {tokSecret, badWS},
	} {
		if _, err := Mint(tc.secret, tc.c); err == nil {
			t.Errorf("Mint %s: no error", name)
		} else if strings.Contains(err.Error(), string(tokSecret)) {
			t.Errorf("Mint %s: error leaks the secret", name)
		}
	}
}

// FuzzVerify: no input panics, an error always wraps ErrUnauthenticated
// and never echoes the input, and an accepted token has valid claims. Each
// input is tried as a token and, to reach claim validation, as the payload
// of an HS256 token signed with the secret.
func FuzzVerify(f *testing.F) {
	k := tokKeys()
	v, err := NewVerifier(VerifierConfig{
		HS256Secret: tokSecret,
		PublicKeys:  tokJWKS(f, tokJWK(f, k.rsa.Public(), "rsa", ""), tokJWK(f, k.ec.Public(), "ec", "ES256"), tokJWK(f, k.ed.Public(), "ed", "")),
		Issuer:      "https://idp.example",
		Now:         tokClock,
	})
	if err != nil {
		f.Fatal(err)
	}
	single, err := NewVerifier(VerifierConfig{PublicKeys: tokPEM(f, k.ed.Public()), Now: tokClock})
	if err != nil {
		f.Fatal(err)
	}
	c := tokClaims()
	c.Issuer = "https://idp.example"
	f.Add(tokHS(f, c))
	f.Add(tokSign(f, jwt.SigningMethodRS256, k.rsa, "rsa", c))
	f.Add(tokSign(f, jwt.SigningMethodES256, k.ec, "ec", c))
	f.Add(tokSign(f, jwt.SigningMethodEdDSA, k.ed, "", c))
	f.Add(tokNone(f, ""))
	f.Add(tokNone(f, "rsa"))
	f.Add("garbage")
	f.Add("")
	f.Add("..")
	f.Add("e30.e30.")
	payload, _ := json.Marshal(c)
	f.Add(string(payload))
	f.Add(`{"sub":"session:a","ws":"w","aud":"wakegate","iss":"https://idp.example","exp":1e300,"nbf":-1e300}`)
	hmacHeader := strings.Split(tokHS(f, c), ".")[0] + "."
	f.Fuzz(func(t *testing.T, in string) {
		signed := hmacHeader + base64.RawURLEncoding.EncodeToString([]byte(in))
		sig, err := jwt.SigningMethodHS256.Sign(signed, tokSecret)
		if err != nil {
			t.Fatal(err)
		}
		signed += "." + base64.RawURLEncoding.EncodeToString(sig)
		for _, tc := range []struct {
			v   *Verifier
			tok string
		}{{v, in}, {single, in}, {v, signed}} {
			v, tok := tc.v, tc.tok
			c, err := v.Verify(tok)
			if err != nil {
				if c != nil {
					t.Fatalf("claims with error %v", err)
				}
				if !errors.Is(err, ErrUnauthenticated) {
					t.Fatalf("error %v does not wrap ErrUnauthenticated", err)
				}
				if msg := err.Error(); len(msg) > 60 || len(tok) >= 8 && strings.Contains(msg, tok) {
					t.Fatalf("error message %q too long or echoes input", msg)
				}
				continue
			}
			if c.Party() == "" || c.ExpiresAt == nil || c.Workspace == "" {
				t.Fatalf("accepted token with invalid claims %+v", c)
			}
		}
	})
}

// A verified token is served from the cache — a copy of its claims —
// until its exp or a minute after it was verified, whichever is first;
// after that it is verified again, so an expired token is refused.
func TestVerifiedTokenCache(t *testing.T) {
	now := tokNow
	v := tokVerifier(t, VerifierConfig{HS256Secret: tokSecret, Now: func() time.Time { return now }})
	c := tokClaims()
	c.ExpiresAt = jwt.NewNumericDate(tokNow.Add(90 * time.Second))
	tok := tokHS(t, c)

	first := tokVerify(t, v, tok)
	first.Scope = "admin" // a caller's change stays its own
	if _, ok := v.cache.get(tok, now); !ok {
		t.Fatal("a verified token is not cached")
	}
	if again := tokVerify(t, v, tok); again.Scope != "events:push inbox" {
		t.Fatalf("cached claims changed by a caller: scope %q", again.Scope)
	}
	// A token differing in one byte of its signature is not the cached one.
	tampered := tok[:len(tok)-2] + map[bool]string{true: "AA", false: "BB"}[tok[len(tok)-2:] != "AA"]
	tokRefuse(t, v, tampered, "signature")

	now = tokNow.Add(61 * time.Second) // a minute later: verified again (still valid)
	if _, ok := v.cache.get(tok, now); ok {
		t.Error("served from the cache more than a minute after its verification")
	}
	tokVerify(t, v, tok)
	now = tokNow.Add(90*time.Second + leeway + time.Second) // past exp and the leeway
	if _, ok := v.cache.get(tok, now); ok {
		t.Error("served from the cache after its exp")
	}
	tokRefuse(t, v, tok, "token expired")
}
