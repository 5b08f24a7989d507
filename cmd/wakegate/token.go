package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wakegate/wakegate/providers/agent"
)

func jwtDate(t time.Time) *jwt.NumericDate { return jwt.NewNumericDate(t) }

// runToken prints a signed token for WAKEGATE_JWT_HS256_SECRET.
func runToken(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("wakegate token", flag.ContinueOnError)
	fs.SetOutput(stderr)
	sub := fs.String("sub", "", "the party the token speaks for: session:<id> or human:<channel> (required)")
	ws := fs.String("workspace", "default", "the workspace")
	scope := fs.String("scope", "events:push events:read inbox subscribe", "space-separated scopes ("+allScopes+")")
	ttl := fs.Duration("ttl", 24*time.Hour, "lifetime")
	iss := fs.String("jwt-issuer", os.Getenv("WAKEGATE_JWT_ISSUER"), "iss of the token: the gateway's WAKEGATE_JWT_ISSUER, which it requires when set")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "Usage: wakegate token --sub session:abc [--workspace default] [--scope \"events:push inbox\"] [--ttl 24h]\n\nSigns with WAKEGATE_JWT_HS256_SECRET (or WAKEGATE_JWT_HS256_SECRET_FILE), with iss\nWAKEGATE_JWT_ISSUER when set.")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	secret := os.Getenv("WAKEGATE_JWT_HS256_SECRET")
	if secret == "" {
		if path := os.Getenv("WAKEGATE_JWT_HS256_SECRET_FILE"); path != "" {
			b, err := os.ReadFile(path)
			if err != nil {
				return fmt.Errorf("WAKEGATE_JWT_HS256_SECRET_FILE: %w", err)
			}
			secret = strings.TrimSpace(string(b))
		}
	}
	if secret == "" {
		return errors.New("WAKEGATE_JWT_HS256_SECRET is not set")
	}
	if *sub == "" {
		fs.Usage()
		return errors.New("--sub is required")
	}
	c := agent.Claims{Workspace: *ws, Scope: strings.Join(strings.Fields(*scope), " ")}
	c.Subject = *sub
	c.Issuer = *iss
	c.ExpiresAt = jwtDate(time.Now().Add(*ttl))
	tok, err := agent.Mint([]byte(secret), c)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, tok)
	return nil
}
