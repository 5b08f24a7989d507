package app

import (
	"crypto/rand"
	"crypto/rsa"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

// TestAppJWT: the JWT wakegate signs passes GitHub's rules as the fake
// checks them (RS256 by the App's key, iss, integer iat back-dated 60 s,
// exp in the future and at most 10 minutes ahead).
func TestAppJWT(t *testing.T) {
	key, _ := apptest.Key()
	now := time.Now()
	tok, err := signAppJWT(key, apptest.AppID, now)
	if err != nil {
		t.Fatal(err)
	}
	if err := apptest.CheckAppJWT(tok, &key.PublicKey, apptest.AppID, now); err != nil {
		t.Fatalf("wakegate's JWT is refused: %v", err)
	}
}

// TestCheckAppJWTRefuses proves the fake's checker can fail: every kind
// of JWT GitHub refuses is refused.
func TestCheckAppJWTRefuses(t *testing.T) {
	key, _ := apptest.Key()
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	sign := func(k any, m jwt.SigningMethod, claims jwt.MapClaims) string {
		s, err := jwt.NewWithClaims(m, claims).SignedString(k)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	good := func() jwt.MapClaims {
		return jwt.MapClaims{"iat": now.Add(-60 * time.Second).Unix(), "exp": now.Add(5 * time.Minute).Unix(), "iss": apptest.AppID}
	}
	with := func(k string, v any) jwt.MapClaims { c := good(); c[k] = v; return c }
	cases := map[string]string{
		"control":           sign(key, jwt.SigningMethodRS256, good()),
		"another key":       sign(other, jwt.SigningMethodRS256, good()),
		"HS256":             sign([]byte("secret"), jwt.SigningMethodHS256, good()),
		"expired":           sign(key, jwt.SigningMethodRS256, with("exp", now.Add(-time.Second).Unix())),
		"exp over 10 min":   sign(key, jwt.SigningMethodRS256, with("exp", now.Add(11*time.Minute).Unix())),
		"iat not backdated": sign(key, jwt.SigningMethodRS256, with("iat", now.Unix())),
		"fractional iat":    sign(key, jwt.SigningMethodRS256, with("iat", float64(now.Add(-60*time.Second).UnixMilli())/1000+0.5)),
		"wrong iss":         sign(key, jwt.SigningMethodRS256, with("iss", "1")),
		"garbage":           "not.a.jwt",
	}
	for name, tok := range cases {
		err := apptest.CheckAppJWT(tok, &key.PublicKey, apptest.AppID, now)
		if (err == nil) != (name == "control") {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

// TestJWTFreshPerRequest: the transport signs each request at its own
// time, so a request made 9 minutes after another still carries a JWT
// GitHub takes.
func TestJWTFreshPerRequest(t *testing.T) {
	key, _ := apptest.Key()
	clock := time.Now()
	var seen []string
	tr := &jwtTransport{key: key, appID: apptest.AppID, now: func() time.Time { return clock },
		next: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			seen = append(seen, strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer "))
			return &http.Response{StatusCode: 200, Body: http.NoBody, Request: r}, nil
		})}
	for i := range 2 {
		req, _ := http.NewRequest(http.MethodGet, "http://github.invalid/app", nil)
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.Header.Get("Authorization") != "" {
			t.Fatal("the caller's request was modified")
		}
		if err := apptest.CheckAppJWT(seen[i], &key.PublicKey, apptest.AppID, clock); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		clock = clock.Add(9 * time.Minute)
	}
	if seen[0] == seen[1] {
		t.Fatal("the same JWT was sent twice")
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
