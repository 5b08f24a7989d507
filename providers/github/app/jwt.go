package app

import (
	"crypto/rsa"
	"fmt"
	"net/http"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// GitHub's rules for an App JWT (docs: "Generating a JSON Web Token (JWT)
// for a GitHub App"): RS256, integer iat and exp, iat back-dated for clock
// drift, exp at most 10 minutes ahead, iss the App id.
const (
	jwtBackdate = 60 * time.Second
	jwtLifetime = 5 * time.Minute // from now; well inside GitHub's 10 minutes
)

// signAppJWT returns an App JWT for appID signed with key, issued at now.
// The claims are plain integers whatever jwt.TimePrecision is set to.
func signAppJWT(key *rsa.PrivateKey, appID string, now time.Time) (string, error) {
	claims := jwt.MapClaims{
		"iat": now.Add(-jwtBackdate).Unix(),
		"exp": now.Add(jwtLifetime).Unix(),
		"iss": appID,
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodRS256, claims).SignedString(key)
	if err != nil {
		return "", fmt.Errorf("sign app jwt: %w", err)
	}
	return s, nil
}

// jwtTransport signs every request it sends with a fresh App JWT, so no
// request ever carries an expired one, however long a sweep pages.
type jwtTransport struct {
	key   *rsa.PrivateKey
	appID string
	now   func() time.Time
	next  http.RoundTripper
}

// RoundTrip implements http.RoundTripper.
func (t *jwtTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	tok, err := signAppJWT(t.key, t.appID, t.now())
	if err != nil {
		if req.Body != nil {
			_ = req.Body.Close()
		}
		return nil, err
	}
	r := req.Clone(req.Context())
	r.Header.Set("Authorization", "Bearer "+tok)
	return t.next.RoundTrip(r)
}
