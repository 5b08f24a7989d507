package main

import (
	"bytes"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/providers/agent"
)

func TestParseConfig(t *testing.T) {
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte("from-file\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(*config) bool
		wantErr string
	}{
		{"defaults", nil, nil, func(c *config) bool {
			return c.Addr == ":8080" && c.RedisPrefix == "wg" && c.Shards == 16 && c.Retention == 72*time.Hour && c.ReadySettle == time.Minute
		}, ""},
		{"env", nil, map[string]string{"WAKEGATE_ADDR": ":9000", "WAKEGATE_GITHUB_WEBHOOK_SECRETS": "new, old"}, func(c *config) bool {
			return c.Addr == ":9000" && len(c.WebhookSecrets) == 2 && c.WebhookSecrets[1] == "old"
		}, ""},
		{"flag wins over env", []string{"--addr", ":7000"}, map[string]string{"WAKEGATE_ADDR": ":9000"}, func(c *config) bool {
			return c.Addr == ":7000"
		}, ""},
		{"secret from file", nil, map[string]string{"WAKEGATE_JWT_HS256_SECRET_FILE": secretFile}, func(c *config) bool {
			return c.JWTSecret == "from-file"
		}, ""},
		{"push settings", []string{"--allow-private-endpoints", "true", "--push-retry", "1s,1m"}, nil, func(c *config) bool {
			return c.AllowPrivateEndpoints && len(c.PushRetry) == 2 && c.PushRetry[1] == time.Minute
		}, ""},
		{"default push retry is about three days", nil, nil, func(c *config) bool {
			var total time.Duration
			for _, d := range c.PushRetry {
				total += d
			}
			return !c.AllowPrivateEndpoints && len(c.PushRetry) == 9 && total > 70*time.Hour && total < 90*time.Hour
		}, ""},
		{"bad push retry", nil, map[string]string{"WAKEGATE_PUSH_RETRY": "5s,soon"}, nil, "WAKEGATE_PUSH_RETRY"},
		{"bad duration", nil, map[string]string{"WAKEGATE_SESSION_TTL": "soon"}, nil, "WAKEGATE_SESSION_TTL"},
		{"bad workspaces", nil, map[string]string{"WAKEGATE_WORKSPACES": "org/repo"}, nil, "WAKEGATE_WORKSPACES"},
		{"bad prefix", []string{"--redis-prefix", "a b"}, nil, nil, "WAKEGATE_REDIS_PREFIX"},
		{"secrets are not flags", []string{"--jwt-hs256-secret", "x"}, nil, nil, "flag provided but not defined"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs := flag.NewFlagSet("test", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			c, err := parseConfig(fs, tt.args, func(k string) string { return tt.env[k] })
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %s", err, tt.wantErr)
				}
				return
			}
			if err != nil || !tt.check(c) {
				t.Fatalf("config %+v, err %v", c, err)
			}
		})
	}
}

func TestTokenCommand(t *testing.T) {
	t.Setenv("WAKEGATE_JWT_HS256_SECRET", "k")
	var out, errb bytes.Buffer
	if code := run([]string{"token", "--sub", "session:abc", "--workspace", "team", "--scope", "events:push inbox", "--ttl", "1h"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte("k")})
	if err != nil {
		t.Fatal(err)
	}
	c, err := v.Verify(strings.TrimSpace(out.String()))
	if err != nil || c.Subject != "session:abc" || c.Workspace != "team" || !c.Has("inbox") || c.Has("admin") {
		t.Fatalf("claims %+v, %v", c, err)
	}
	if code := run([]string{"token"}, &out, &errb); code == 0 {
		t.Fatal("token without --sub succeeded")
	}
}

// TestSecretFloors (docs/design.md §10): gateway, worker and serve refuse
// to start with an HS256 secret under 32 bytes, a webhook secret under 16
// or an operator password under 12 characters, say how to generate one,
// and never quote the secret.
func TestSecretFloors(t *testing.T) {
	good := map[string]string{
		"WAKEGATE_REDIS_URL":              "unix-not-a-redis-url", // past the floors, the start stops here
		"WAKEGATE_JWT_HS256_SECRET":       strings.Repeat("j", 32),
		"WAKEGATE_GITHUB_WEBHOOK_SECRETS": strings.Repeat("w", 16),
		"WAKEGATE_OPERATOR_PASSWORD":      "twelve-chars",
	}
	for _, tt := range []struct{ name, env, value, want string }{
		{"hs256", "WAKEGATE_JWT_HS256_SECRET", "k", "openssl rand -hex 32"},
		{"hs256 31 bytes", "WAKEGATE_JWT_HS256_SECRET", strings.Repeat("k", 31), "at least 32"},
		{"webhook", "WAKEGATE_GITHUB_WEBHOOK_SECRETS", "s", "openssl rand -hex 20"},
		{"second webhook secret", "WAKEGATE_GITHUB_WEBHOOK_SECRETS", strings.Repeat("w", 16) + ",short-one", "secret 2 of 2"},
		{"operator password", "WAKEGATE_OPERATOR_PASSWORD", "hunter2", "openssl rand -base64 18"},
		{"operator password 11 characters", "WAKEGATE_OPERATOR_PASSWORD", "ééééééééééé", "at least 12"},
	} {
		for _, role := range []string{"gateway", "worker", "serve"} {
			t.Run(tt.name+"/"+role, func(t *testing.T) {
				for k, v := range good {
					t.Setenv(k, v)
				}
				t.Setenv(tt.env, tt.value)
				var out, errb bytes.Buffer
				if code := run([]string{role}, &out, &errb); code == 0 {
					t.Fatalf("wakegate %s started with %s=%q", role, tt.env, tt.value)
				}
				if !strings.Contains(errb.String(), tt.want) || !strings.Contains(errb.String(), tt.env) {
					t.Fatalf("wakegate %s: %q, want a message naming %s and %q", role, errb.String(), tt.env, tt.want)
				}
				if strings.Contains(errb.String(), "short-one") || strings.Contains(errb.String(), "hunter2") {
					t.Fatalf("the message quotes the secret: %s", errb.String())
				}
			})
		}
	}
	// At the floors, the secrets pass (the start then fails on the
	// Redis URL, not on a secret).
	if err := checkSecretFloors(&config{JWTSecret: good["WAKEGATE_JWT_HS256_SECRET"],
		WebhookSecrets: []string{good["WAKEGATE_GITHUB_WEBHOOK_SECRETS"]}, OperatorPassword: "ééééééééééé!"}); err != nil {
		t.Fatalf("secrets at the floors refused: %v", err)
	}
}

// With WAKEGATE_JWT_ISSUER set, `wakegate token` signs with that iss, so a
// gateway that requires it accepts the token.
func TestTokenCommandIssuer(t *testing.T) {
	t.Setenv("WAKEGATE_JWT_HS256_SECRET", "k")
	t.Setenv("WAKEGATE_JWT_ISSUER", "https://wakegate.example")
	var out, errb bytes.Buffer
	if code := run([]string{"token", "--sub", "session:abc"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte("k"), Issuer: "https://wakegate.example"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(strings.TrimSpace(out.String())); err != nil {
		t.Fatalf("a token of wakegate token with WAKEGATE_JWT_ISSUER set: %v", err)
	}
}
