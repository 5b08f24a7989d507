package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/alicebob/miniredis/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

// allScopes is what the operator token serve prints carries.
const allScopes = "events:push events:push:any events:read events:read:any inbox subscribe supervise spawn admin operator"

func runService(ctx context.Context, role string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("wakegate "+role, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "Usage: wakegate %s [flags]\n\nSettings (flag, environment variable, default):\n", role)
		fs.PrintDefaults()
		fmt.Fprintln(stderr, "\nSecrets are environment variables only (or <NAME>_FILE): WAKEGATE_REDIS_URL,\nWAKEGATE_GITHUB_WEBHOOK_SECRETS, WAKEGATE_JWT_HS256_SECRET, WAKEGATE_JWT_PUBLIC_KEYS,\nWAKEGATE_OPERATOR_PASSWORD, WAKEGATE_GITHUB_APP_PRIVATE_KEY.")
	}
	cfg, err := parseConfig(fs, args, os.Getenv)
	if err != nil {
		return err
	}
	if err := checkSecretFloors(cfg); err != nil {
		return err
	}
	log := newLogger(stderr, cfg.LogLevel)
	slog.SetDefault(log)
	if cfg.CPUProfile != "" {
		stop, err := startCPUProfile(cfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}

	if cfg.RedisURL == "" {
		if role != "serve" {
			return errors.New("WAKEGATE_REDIS_URL is required (only serve embeds a Redis)")
		}
		mr, err := startEmbeddedRedis(ctx, log)
		if err != nil {
			return err
		}
		defer mr.Close()
		cfg.RedisURL = "redis://" + mr.Addr()
	}
	generated := role == "serve" && len(cfg.WebhookSecrets) == 0 && cfg.JWTSecret == "" && cfg.JWTPublicKeys == ""
	if generated {
		if err := generateSecrets(cfg, stdout, log); err != nil {
			return err
		}
	}
	rdb, err := stack.NewClient(cfg.RedisURL, cfg.Shards)
	if err != nil {
		return err
	}
	defer rdb.Close()

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	st, err := stack.New(rdb, stack.Config{
		Prefix: cfg.RedisPrefix, Shards: cfg.Shards, Retention: cfg.Retention, JournalMaxLen: cfg.JournalMaxLen,
		RequiredChecks: cfg.RequiredChecks, ReadySettle: cfg.ReadySettle, SessionTTL: cfg.SessionTTL,
		PushRetry: cfg.PushRetry, PushQueues: cfg.PushQueues, AllowPrivateEndpoints: cfg.AllowPrivateEndpoints,
		Workspaces: cfg.Workspaces, GitHubApp: cfg.gitHubApp(),
		MaxTurn: cfg.MaxTurn, PRStuckAfter: cfg.PRStuckAfter, HealthEvery: cfg.HealthEvery,
		MaxSubscriptions: cfg.MaxSubscriptions, WorkerID: cfg.WorkerID,
	}, log, reg)
	if err != nil {
		return err
	}
	if generated {
		if err := demoFallback(ctx, st.Sup, log); err != nil {
			return err
		}
	}
	if cfg.AllowPrivateEndpoints {
		log.Warn("WAKEGATE_ALLOW_PRIVATE_ENDPOINTS is on: pushes may reach loopback and private networks")
	}

	var components []stack.Component
	var ready func() error // a worker's own readiness: its consumers are running
	if role == "serve" || role == "worker" {
		var workers []stack.Component
		workers, ready = st.WorkerComponents()
		// A worker started while Redis is down waits for it, unready
		// (docs/design.md §11).
		components = append(components, stack.AfterRedis(rdb, log, workers)...)
		if role == "worker" {
			components = append(components, stack.Component{Name: "admin", Stage: stack.StageAdmin, Run: func(actx context.Context) error {
				return serveAdmin(actx, ctx.Done(), cfg.WorkerAddr, rdb, reg, ready, log)
			}})
		}
	}
	if role == "serve" || role == "gateway" {
		gw, err := buildGateway(cfg, st, ready)
		if err != nil {
			return err
		}
		components = append(components, stack.Component{Name: "gateway", Stage: stack.StageFront, Run: gw.Run})
	}
	log.Info("wakegate started", "role", role, "redis_prefix", cfg.RedisPrefix, "shards", cfg.Shards)
	// The gateway drains first, then the consumers stop, then the queue
	// (docs/design.md §11).
	err = stack.Run(ctx, components)
	log.Info("wakegate stopped", "role", role)
	return err
}

func buildGateway(cfg *config, st *stack.Stack, ready func() error) (*gateway.Server, error) {
	if len(cfg.WebhookSecrets) == 0 {
		return nil, errors.New("WAKEGATE_GITHUB_WEBHOOK_SECRETS is required: the gateway never accepts unsigned webhooks")
	}
	if cfg.JWTSecret == "" && cfg.JWTPublicKeys == "" {
		return nil, errors.New("WAKEGATE_JWT_HS256_SECRET or WAKEGATE_JWT_PUBLIC_KEYS is required to verify agent tokens")
	}
	verifier, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(cfg.JWTSecret), PublicKeys: cfg.JWTPublicKeys, Issuer: cfg.JWTIssuer})
	if err != nil {
		return nil, err
	}
	limits, err := gateway.ParseLimits(cfg.IngestLimits)
	if err != nil {
		return nil, fmt.Errorf("WAKEGATE_INGEST_LIMITS: %w", err)
	}
	workspaces, _ := github.ParseWorkspaces(cfg.Workspaces, event.ValidWorkspace)
	maxBody, _ := parseBytes(cfg.MaxBody)
	secrets := make([][]byte, len(cfg.WebhookSecrets))
	for i, s := range cfg.WebhookSecrets {
		secrets[i] = []byte(s)
	}
	var tokenSecret []byte
	if cfg.JWTSecret != "" {
		tokenSecret = []byte(cfg.JWTSecret)
	}
	return st.Gateway(gateway.Config{
		Addr: cfg.Addr, WebhookSecrets: secrets, AppID: cfg.GitHubAppID, Workspaces: workspaces,
		MaxBody: maxBody, Limits: limits, TokenSecret: tokenSecret, TokenIssuer: cfg.JWTIssuer, PresenceTTL: cfg.PresenceTTL,
		OperatorPassword: []byte(cfg.OperatorPassword),
		BodyTimeout:      cfg.BodyTimeout, BodiesPerClient: cfg.BodiesPerClient,
	}, verifier, ready)
}

// Secret floors (docs/design.md §10): a process given a shorter secret
// refuses to start. Secrets serve generates itself are longer.
const (
	minJWTSecret        = 32 // bytes
	minWebhookSecret    = 16 // bytes
	minOperatorPassword = 12 // characters
)

// checkSecretFloors refuses secrets under their floors, saying how to
// generate one; it never quotes a secret.
func checkSecretFloors(cfg *config) error {
	if n := len(cfg.JWTSecret); n > 0 && n < minJWTSecret {
		return fmt.Errorf("WAKEGATE_JWT_HS256_SECRET is %d bytes; at least %d are required: generate one with `openssl rand -hex 32`", n, minJWTSecret)
	}
	for i, s := range cfg.WebhookSecrets {
		if len(s) < minWebhookSecret {
			return fmt.Errorf("WAKEGATE_GITHUB_WEBHOOK_SECRETS: secret %d of %d is %d bytes; at least %d are required: generate one with `openssl rand -hex 20` (and set it on the GitHub webhook too)",
				i+1, len(cfg.WebhookSecrets), len(s), minWebhookSecret)
		}
	}
	if n := utf8.RuneCountInString(cfg.OperatorPassword); n > 0 && n < minOperatorPassword {
		return fmt.Errorf("WAKEGATE_OPERATOR_PASSWORD is %d characters; at least %d are required: generate one with `openssl rand -base64 18`", n, minOperatorPassword)
	}
	return nil
}

// startCPUProfile profiles the process into path until stop is called.
func startCPUProfile(path string) (stop func(), err error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("WAKEGATE_CPU_PROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("WAKEGATE_CPU_PROFILE: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}

// startEmbeddedRedis runs miniredis on loopback and advances its clock
// every second, so TTLs expire as they would on Redis.
func startEmbeddedRedis(ctx context.Context, log *slog.Logger) (*miniredis.Miniredis, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("start embedded redis: %w", err)
	}
	mr.SetTime(time.Now())
	go func() {
		t := time.NewTicker(time.Second)
		defer t.Stop()
		last := time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				mr.FastForward(now.Sub(last))
				mr.SetTime(now)
				last = now
			}
		}
	}()
	log.Warn("EMBEDDED REDIS: all state is in memory and is LOST when wakegate exits; set WAKEGATE_REDIS_URL for real use", "addr", mr.Addr())
	return mr, nil
}

// demoOperator is the party of the operator token a zero-setup serve
// prints; demoSession is the session its printed demo pushes about.
const (
	demoOperator  = "human:operator"
	demoSession   = "session:demo"
	demoWorkspace = "default"
)

// settingsMerger is what demoFallback needs of the supervision store.
type settingsMerger interface {
	Settings(ctx context.Context, workspace string) (supervision.Settings, error)
	MergeSettings(ctx context.Context, workspace string, patch []byte) (supervision.Settings, error)
}

// demoFallback makes the operator of a zero-setup serve the default
// workspace's human fallback, so that the printed demo's session event,
// which nobody supervises, reaches the operator's inbox instead of ending
// as an undeliverable fault. A fallback already set is left alone.
func demoFallback(ctx context.Context, sup settingsMerger, log *slog.Logger) error {
	cur, err := sup.Settings(ctx, demoWorkspace)
	if err != nil {
		return fmt.Errorf("read the default workspace's settings: %w", err)
	}
	if cur.Fallback != nil && cur.Fallback.Party != "" {
		log.Info("the default workspace already has a fallback; the printed demo's wake goes there", "fallback", cur.Fallback.Party)
		return nil
	}
	if _, err := sup.MergeSettings(ctx, demoWorkspace, []byte(`{"fallback":{"party":"`+demoOperator+`"}}`)); err != nil {
		return fmt.Errorf("make the operator the default workspace's fallback: %w", err)
	}
	log.Info("the operator (the printed token's "+demoOperator+") is the default workspace's fallback: a session event that reaches nobody else wakes its inbox",
		"workspace", demoWorkspace, "fallback", demoOperator)
	return nil
}

// generateSecrets makes a webhook secret and a token secret for a
// zero-setup serve, and shows them with an operator token, a demo
// session's token and the curl lines of a first wake: on the terminal, or
// in a 0600 file whose path is logged.
func generateSecrets(cfg *config, stdout io.Writer, log *slog.Logger) error {
	cfg.WebhookSecrets = []string{randomHex(24)}
	cfg.JWTSecret = randomHex(32)
	exp := jwtDate(time.Now().Add(30 * 24 * time.Hour))
	op := agent.Claims{Workspace: demoWorkspace, Scope: allScopes}
	op.Subject, op.ExpiresAt, op.Issuer = demoOperator, exp, cfg.JWTIssuer
	tok, err := agent.Mint([]byte(cfg.JWTSecret), op)
	if err != nil {
		return fmt.Errorf("mint operator token: %w", err)
	}
	demo := agent.Claims{Workspace: demoWorkspace, Scope: "events:push"}
	demo.Subject, demo.ExpiresAt, demo.Issuer = demoSession, exp, cfg.JWTIssuer
	demoTok, err := agent.Mint([]byte(cfg.JWTSecret), demo)
	if err != nil {
		return fmt.Errorf("mint demo session token: %w", err)
	}
	host := cfg.Addr
	if strings.HasPrefix(host, ":") {
		host = "127.0.0.1" + host
	}
	text := fmt.Sprintf(`wakegate generated secrets for this run (no WAKEGATE_* secrets were set):

  WAKEGATE_GITHUB_WEBHOOK_SECRETS=%[1]s
  WAKEGATE_JWT_HS256_SECRET=%[2]s

Your operator token (%[3]s, workspace "default", every scope, 30 days).
You are the "default" workspace's fallback: a session event that needs
attention and reaches nobody else wakes your inbox.

  export WAKEGATE_TOKEN=%[4]s

Try it. A session (%[5]s, its own token) ends its turn; nobody supervises
it, so the wake comes to you; then read your inbox (or: wakegate inbox):

  export DEMO_SESSION_TOKEN=%[6]s
  curl -s -H "Authorization: Bearer $DEMO_SESSION_TOKEN" -H 'Content-Type: application/cloudevents+json' \
    -d '{"specversion":"1.0","id":"1","source":"cli","type":"session.turn_ended","subject":"%[5]s","data":{"idle":true}}' \
    http://%[7]s/v1/events
  curl -s -H "Authorization: Bearer $WAKEGATE_TOKEN" 'http://%[7]s/v1/inbox?wait=5s'
`, cfg.WebhookSecrets[0], cfg.JWTSecret, demoOperator, tok, demoSession, demoTok, host)
	if f, ok := stdout.(*os.File); ok && isTerminal(f) {
		fmt.Fprintln(stdout, text)
		return nil
	}
	path := cfg.SecretsFile
	if path == "" {
		path = filepath.Join(os.TempDir(), "wakegate-secrets-"+randomHex(4)+".txt")
	}
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		return fmt.Errorf("write generated secrets: %w", err)
	}
	log.Warn("generated secrets, an operator token and the curl lines of a first wake are in a file readable only by this user", "path", path)
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// serveAdmin serves a worker's /healthz, /readyz and /metrics until ctx
// ends; /readyz answers 503 from the moment stopping closes.
func serveAdmin(ctx context.Context, stopping <-chan struct{}, addr string, rdb redis.UniversalClient, reg *prometheus.Registry, ready func() error, log *slog.Logger) error {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, `{"status":"ok"}`) })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		if isClosed(stopping) || rdb.Ping(r.Context()).Err() != nil || ready() != nil {
			http.Error(w, `{"status":"unavailable"}`, http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, `{"status":"ready"}`)
	})
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	log.Info("worker admin listening", "addr", ln.Addr().String())
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
