// Package agent authenticates callers of wakegate's agent API (docs/design.md §4,
// §10): it verifies the bearer JWTs every /v1 route takes and mints the
// HS256 tokens of `wakegate token` (§12).
//
// Verification is pinned: an HS256 token is checked only against
// WAKEGATE_JWT_HS256_SECRET; an RS256, ES256 or EdDSA token only against the
// public key its kid names, and only with that key's own algorithm. Every
// token must carry exp and an aud containing "wakegate", iss when one is
// configured, a party as sub and a valid workspace as ws.
package agent

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wakegate/wakegate/providers/event"
)

// audience is the aud every wakegate token must contain.
const audience = "wakegate"

// leeway is the clock skew tolerated on exp, nbf and iat: a token is
// accepted up to 30 s after exp and up to 30 s before nbf or iat.
const leeway = 30 * time.Second

// maxTokenLen bounds the work an unauthenticated caller can ask for.
const maxTokenLen = 8 << 10

// Claims of a wakegate token: sub is a party, ws the workspace, scope
// space-separated.
type Claims struct {
	Workspace string `json:"ws"`
	Scope     string `json:"scope"`
	jwt.RegisteredClaims
}

// Party is the token's subject as a party, or "" when sub is not one (a
// verified token's always is).
func (c *Claims) Party() event.Party {
	p, err := event.ParseParty(c.Subject)
	if err != nil {
		return ""
	}
	return p
}

// Has reports whether scope is exactly one of the token's scopes. No scope
// implies another: "operator" does not grant "admin", nor "events:push:any"
// "events:push".
func (c *Claims) Has(scope string) bool {
	for _, s := range c.Scopes() {
		if s == scope {
			return true
		}
	}
	return false
}

// Scopes returns the token's scopes in order; empty when it has none.
func (c *Claims) Scopes() []string { return strings.Fields(c.Scope) }

// ErrUnauthenticated is wrapped by every error Verify returns (→ 401).
var ErrUnauthenticated = errors.New("unauthenticated")

// VerifierConfig holds the verification keys and the expected issuer.
type VerifierConfig struct {
	// HS256Secret is WAKEGATE_JWT_HS256_SECRET; empty accepts no HS256
	// token.
	HS256Secret []byte
	// PublicKeys is WAKEGATE_JWT_PUBLIC_KEYS: a JWKS document
	// {"keys":[...]} of RSA, EC P-256 and OKP Ed25519 keys (kid and alg from
	// each JWK; alg inferred from kty/crv when absent, kid the RFC 7638
	// thumbprint when absent; "use":"enc" keys skipped), or one or more PEM
	// public keys (PUBLIC KEY, RSA PUBLIC KEY or CERTIFICATE blocks; kid the
	// RFC 7638 thumbprint, base64url). The algorithm follows the key type:
	// RSA→RS256 (at least 2048 bits), P-256→ES256, Ed25519→EdDSA.
	PublicKeys string
	// Issuer is WAKEGATE_JWT_ISSUER; when set, iss must equal it.
	Issuer string
	// Now is the clock, for tests; nil is time.Now.
	Now func() time.Time
}

// Verifier checks wakegate tokens. It is safe for concurrent use.
type Verifier struct {
	hs     *verifyKey            // nil: no HS256 secret
	byKid  map[string]*verifyKey // public keys
	single *verifyKey            // the only key, when it may be used without kid
	now    func() time.Time
	cache  verifiedCache
}

// verifiedCache remembers tokens verified in the last minute by their whole
// text — signature included, so an entry stands for exactly the bytes that
// were verified — so that a client's every request does not parse and
// check the same token again. An entry serves until the token's exp or a
// minute after its verification, whichever is first; the map is cleared
// when it reaches verifiedCacheMax entries.
type verifiedCache struct {
	mu sync.Mutex
	m  map[string]verified
}

type verified struct {
	claims Claims
	until  time.Time
}

const (
	verifiedCacheTTL = time.Minute
	verifiedCacheMax = 16384
)

func (c *verifiedCache) get(token string, now time.Time) (*Claims, bool) {
	c.mu.Lock()
	e, ok := c.m[token]
	c.mu.Unlock()
	if !ok || !now.Before(e.until) {
		return nil, false
	}
	cl := e.claims
	return &cl, true
}

func (c *verifiedCache) put(token string, cl *Claims, now time.Time) {
	until := now.Add(verifiedCacheTTL)
	if cl.ExpiresAt != nil && cl.ExpiresAt.Before(until) {
		until = cl.ExpiresAt.Time
	}
	c.mu.Lock()
	if c.m == nil || len(c.m) >= verifiedCacheMax {
		c.m = make(map[string]verified)
	}
	c.m[token] = verified{claims: *cl, until: until}
	c.mu.Unlock()
}

// verifyKey is a key with a parser pinned to its one algorithm.
type verifyKey struct {
	alg    string
	key    any
	parser *jwt.Parser
}

// NewVerifier builds a Verifier. It fails when no key is configured or a
// public key cannot be used; the error names the key by position or kid and
// never contains the secret.
func NewVerifier(cfg VerifierConfig) (*Verifier, error) {
	pks, err := parsePublicKeys(cfg.PublicKeys)
	if err != nil {
		return nil, fmt.Errorf("jwt public keys: %w", err)
	}
	if len(cfg.HS256Secret) == 0 && len(pks) == 0 {
		return nil, errors.New("no jwt verification key: set an hs256 secret or public keys")
	}
	opts := []jwt.ParserOption{
		jwt.WithExpirationRequired(),
		jwt.WithAudience(audience),
		jwt.WithIssuedAt(),
		jwt.WithLeeway(leeway),
		jwt.WithStrictDecoding(),
	}
	if cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(cfg.Issuer))
	}
	if cfg.Now != nil {
		opts = append(opts, jwt.WithTimeFunc(cfg.Now))
	}
	pinned := func(alg string, key any) *verifyKey {
		o := append([]jwt.ParserOption{jwt.WithValidMethods([]string{alg})}, opts...)
		return &verifyKey{alg: alg, key: key, parser: jwt.NewParser(o...)}
	}
	v := &Verifier{byKid: make(map[string]*verifyKey, len(pks)), now: time.Now}
	if cfg.Now != nil {
		v.now = cfg.Now
	}
	if len(cfg.HS256Secret) > 0 {
		v.hs = pinned(jwt.SigningMethodHS256.Alg(), append([]byte(nil), cfg.HS256Secret...))
	}
	for _, pk := range pks {
		if _, dup := v.byKid[pk.kid]; dup {
			return nil, fmt.Errorf("jwt public keys: duplicate kid %q", pk.kid)
		}
		v.byKid[pk.kid] = pinned(pk.alg, pk.key)
	}
	if len(pks) == 1 && v.hs == nil {
		v.single = v.byKid[pks[0].kid]
	}
	return v, nil
}

// Verify checks token's signature and claims and returns its claims. exp,
// nbf and iat are allowed 30 s of clock skew. Every error wraps
// ErrUnauthenticated and says why in a few words, never quoting the token.
func (v *Verifier) Verify(token string) (*Claims, error) {
	if len(token) > maxTokenLen {
		return nil, unauthenticated("token too long")
	}
	now := v.now()
	if c, ok := v.cache.get(token, now); ok {
		return c, nil
	}
	k, reason := v.pick(token)
	if k == nil {
		return nil, unauthenticated(reason)
	}
	c := new(Claims)
	_, err := k.parser.ParseWithClaims(token, c, func(*jwt.Token) (any, error) { return k.key, nil })
	if err != nil {
		return nil, unauthenticated(why(err, c))
	}
	if _, err := event.ParseParty(c.Subject); err != nil {
		return nil, unauthenticated("sub is not a party")
	}
	if !event.ValidWorkspace(c.Workspace) {
		return nil, unauthenticated("invalid ws")
	}
	v.cache.put(token, c, now)
	return c, nil
}

// pick chooses the one key token may be verified with from its header,
// or says why there is none. HS256 goes to the secret whatever the kid;
// any other alg must name a public key by kid (unless that key is the only
// one configured) and equal the key's alg.
func (v *Verifier) pick(token string) (*verifyKey, string) {
	seg, _, ok := strings.Cut(token, ".")
	if !ok {
		return nil, "malformed token"
	}
	raw, err := base64.RawURLEncoding.Strict().DecodeString(seg)
	if err != nil {
		return nil, "malformed token"
	}
	var h map[string]any // decoded as jwt decodes it, so both read the same alg
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, "malformed token"
	}
	alg, ok1 := h["alg"].(string)
	kid, ok2 := h["kid"].(string)
	if !ok1 || (h["kid"] != nil && !ok2) {
		return nil, "malformed token"
	}
	if _, ok := h["crit"]; ok {
		return nil, "unsupported crit header" // RFC 7515 §4.1.11: no extension is understood
	}
	var k *verifyKey
	switch {
	case alg == jwt.SigningMethodHS256.Alg():
		if v.hs == nil {
			return nil, "hs256 tokens not accepted"
		}
		return v.hs, ""
	case alg != algRS256 && alg != algES256 && alg != algEdDSA:
		return nil, "algorithm not accepted"
	case kid != "":
		if k = v.byKid[kid]; k == nil {
			return nil, "unknown kid"
		}
	case v.single != nil:
		k = v.single
	default:
		return nil, "missing kid"
	}
	if alg != k.alg {
		return nil, "algorithm does not match key"
	}
	return k, ""
}

// why names the first reason a jwt error gives, in wakegate's words. c is
// filled in when the signature was valid and only the claims failed.
func why(err error, c *Claims) string {
	switch {
	case errors.Is(err, jwt.ErrTokenMalformed):
		return "malformed token"
	case errors.Is(err, jwt.ErrTokenSignatureInvalid):
		return "invalid signature"
	case errors.Is(err, jwt.ErrTokenRequiredClaimMissing):
		switch {
		case c.ExpiresAt == nil:
			return "missing exp"
		case len(c.Audience) == 0 || len(c.Audience) == 1 && c.Audience[0] == "":
			return "missing aud"
		default:
			return "missing iss"
		}
	case errors.Is(err, jwt.ErrTokenExpired):
		return "token expired"
	case errors.Is(err, jwt.ErrTokenNotValidYet), errors.Is(err, jwt.ErrTokenUsedBeforeIssued):
		return "token not valid yet"
	case errors.Is(err, jwt.ErrTokenInvalidAudience):
		return "wrong audience"
	case errors.Is(err, jwt.ErrTokenInvalidIssuer):
		return "wrong issuer"
	}
	return "invalid token"
}

func unauthenticated(reason string) error {
	return fmt.Errorf("%w: %s", ErrUnauthenticated, reason)
}

// Mint signs c with HS256 under secret, as `wakegate token` does. It sets
// aud to exactly "wakegate" and iat to now when zero, and requires exp, a
// party as sub and a valid ws, so it never mints a token Verify refuses for
// its shape.
func Mint(secret []byte, c Claims) (string, error) {
	if len(secret) == 0 {
		return "", errors.New("mint: no hs256 secret")
	}
	if c.ExpiresAt == nil {
		return "", errors.New("mint: exp is required")
	}
	if _, err := event.ParseParty(c.Subject); err != nil {
		return "", fmt.Errorf("mint: sub: %w", err)
	}
	if !event.ValidWorkspace(c.Workspace) {
		return "", fmt.Errorf("mint: invalid ws %q", c.Workspace)
	}
	c.Audience = jwt.ClaimStrings{audience}
	if c.IssuedAt == nil {
		c.IssuedAt = jwt.NewNumericDate(time.Now())
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(secret)
	if err != nil {
		return "", errors.New("mint: signing failed")
	}
	return s, nil
}
