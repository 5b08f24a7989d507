package main

import (
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/providers/github/app"
	"github.com/wakegate/wakegate/workers/tasks"
)

// config is every setting of docs/design.md §12. Each is an environment variable
// and a flag of the same name in kebab case; flags win; secrets may also
// come from <NAME>_FILE and are never flags.
type config struct {
	Addr            string
	WorkerAddr      string
	RedisURL        string
	RedisPrefix     string
	IngestLimits    string
	WebhookSecrets  []string
	JWTSecret       string
	JWTPublicKeys   string
	JWTIssuer       string
	Workspaces      string
	RequiredChecks  string
	GitHubAppID     string
	GitHubAppKey    string // PEM; "" turns the App features off
	GitHubAPIURL    string
	SessionTTL      time.Duration
	PresenceTTL     time.Duration
	ReadySettle     time.Duration
	MaxTurn         time.Duration
	PRStuckAfter    time.Duration
	HealthEvery     time.Duration
	Retention       time.Duration
	JournalMaxLen   int64
	Shards          int
	MaxBody         string
	BodyTimeout     time.Duration
	BodiesPerClient int
	SecretsFile     string
	LogLevel        string
	CPUProfile      string

	AllowPrivateEndpoints bool
	OperatorPassword      string
	MaxSubscriptions      int
	WorkerID              string
	PushRetry             []time.Duration
	PushQueues            int
}

// setting describes one variable for parsing and for --help.
type setting struct {
	env, def, help string
	secret         bool
	set            func(c *config, v string) error
}

func settings() []setting {
	str := func(f func(*config) *string) func(*config, string) error {
		return func(c *config, v string) error { *f(c) = v; return nil }
	}
	dur := func(f func(*config) *time.Duration) func(*config, string) error {
		return func(c *config, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("want a positive duration such as 30s or 10m")
			}
			*f(c) = d
			return nil
		}
	}
	return []setting{
		{"WAKEGATE_ADDR", ":8080", "HTTP listen address of the gateway (and of serve)", false, str(func(c *config) *string { return &c.Addr })},
		{"WAKEGATE_WORKER_ADDR", ":9091", "listen address of a worker's /healthz, /readyz and /metrics", false, str(func(c *config) *string { return &c.WorkerAddr })},
		{"WAKEGATE_WORKER_ID", "", "this worker's identity among the route consumers, kept across restarts so a restarted worker reclaims its shards at once; empty: the host name (a pod's name), with a suffix when another live process on the host holds it", false, str(func(c *config) *string { return &c.WorkerID })},
		{"WAKEGATE_REDIS_URL", "", "redis://, rediss://, redis+sentinel://…?master_name= or redis+cluster:// URL; empty: serve embeds an in-memory Redis, gateway and worker refuse to start", true, str(func(c *config) *string { return &c.RedisURL })},
		{"WAKEGATE_REDIS_PREFIX", keyspace.DefaultPrefix, "prefix of every Redis key and channel", false, str(func(c *config) *string { return &c.RedisPrefix })},
		{"WAKEGATE_INGEST_LIMITS", "workspace=5000/s,token=1000/s", "ingest rate limits per gateway process", false, str(func(c *config) *string { return &c.IngestLimits })},
		{"WAKEGATE_GITHUB_WEBHOOK_SECRETS", "", "comma-separated webhook secrets, all accepted, the first current", true, func(c *config, v string) error {
			c.WebhookSecrets = nil
			for _, s := range strings.Split(v, ",") {
				if s = strings.TrimSpace(s); s != "" {
					c.WebhookSecrets = append(c.WebhookSecrets, s)
				}
			}
			return nil
		}},
		{"WAKEGATE_JWT_HS256_SECRET", "", "HS256 secret agent tokens are signed with (and child tokens minted with)", true, str(func(c *config) *string { return &c.JWTSecret })},
		{"WAKEGATE_JWT_PUBLIC_KEYS", "", "JWKS JSON or PEM public keys for RS256/ES256/EdDSA tokens", true, str(func(c *config) *string { return &c.JWTPublicKeys })},
		{"WAKEGATE_OPERATOR_PASSWORD", "", "HTTP Basic password (user operator) that opens /monitor/ in a browser; usually WAKEGATE_OPERATOR_PASSWORD_FILE", true, str(func(c *config) *string { return &c.OperatorPassword })},
		{"WAKEGATE_JWT_ISSUER", "", "required iss of tokens, when set", false, str(func(c *config) *string { return &c.JWTIssuer })},
		{"WAKEGATE_WORKSPACES", "*=default", "repository → workspace: org/repo=ws,org/*=ws2,*=default", false, str(func(c *config) *string { return &c.Workspaces })},
		{"WAKEGATE_REQUIRED_CHECKS", "", "required checks without an App: org/repo=build,lint;org/*=test", false, str(func(c *config) *string { return &c.RequiredChecks })},
		{"WAKEGATE_GITHUB_APP_ID", "", "GitHub App id: deliveries must name it as their installation target; with the private key, the App's API calls sign as it", false, str(func(c *config) *string { return &c.GitHubAppID })},
		{"WAKEGATE_GITHUB_APP_PRIVATE_KEY", "", "the GitHub App's PEM private key; turns on the missed-delivery sweep, reconciliation, the baseline fetch and required checks from branch protection and rulesets", true, func(c *config, v string) error {
			c.GitHubAppKey = pemNewlines(v)
			return nil
		}},
		{"WAKEGATE_GITHUB_API_URL", app.DefaultAPIURL, "GitHub REST API base URL, used as given (GitHub Enterprise: https://HOST/api/v3/)", false, str(func(c *config) *string { return &c.GitHubAPIURL })},
		{"WAKEGATE_SESSION_TTL", "10m", "a session seen then silent this long is dead", false, dur(func(c *config) *time.Duration { return &c.SessionTTL })},
		{"WAKEGATE_PRESENCE_TTL", "30m", "how long PUT /v1/presence marks a recipient attended when it gives no \"for\"", false, dur(func(c *config) *time.Duration { return &c.PresenceTTL })},
		{"WAKEGATE_READY_SETTLE", "60s", "with no required checks and nothing reported, how long before a PR counts as ready", false, dur(func(c *config) *time.Duration { return &c.ReadySettle })},
		{"WAKEGATE_MAX_TURN", "1h", "a session busy this long with no heartbeat is stalled (the health sweep journals session.stalled)", false, dur(func(c *config) *time.Duration { return &c.MaxTurn })},
		{"WAKEGATE_PR_STUCK_AFTER", "6h", "an open PR, not a draft, with the same head and no new check result this long is stuck (github.pull_request.stuck)", false, dur(func(c *config) *time.Duration { return &c.PRStuckAfter })},
		{"WAKEGATE_HEALTH_EVERY", "1m", "period of the health sweep (invariants, repairs, stalled and stuck), once per tick across workers", false, dur(func(c *config) *time.Duration { return &c.HealthEvery })},
		{"WAKEGATE_RETENTION", "72h", "how long the journal and raw deliveries are kept", false, dur(func(c *config) *time.Duration { return &c.Retention })},
		{"WAKEGATE_JOURNAL_MAXLEN", "10000000", "about how many journal entries are kept in all", false, func(c *config, v string) error {
			_, err := fmt.Sscan(v, &c.JournalMaxLen)
			if err != nil || c.JournalMaxLen <= 0 {
				return fmt.Errorf("want a positive integer")
			}
			return nil
		}},
		{"WAKEGATE_JOURNAL_SHARDS", "16", "number of journal shards; fixed for the life of a deployment", false, func(c *config, v string) error {
			_, err := fmt.Sscan(v, &c.Shards)
			if err != nil || c.Shards <= 0 || c.Shards > 1024 {
				return fmt.Errorf("want an integer from 1 to 1024")
			}
			return nil
		}},
		{"WAKEGATE_MAX_SUBSCRIPTIONS", "1000", "live subscriptions one party may have (beyond: 422)", false, func(c *config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > 1_000_000 {
				return fmt.Errorf("want an integer from 1 to 1000000")
			}
			c.MaxSubscriptions = n
			return nil
		}},
		{"WAKEGATE_MAX_BODY", "25MB", "largest webhook body accepted (GitHub's own cap is 25 MB)", false, str(func(c *config) *string { return &c.MaxBody })},
		{"WAKEGATE_BODY_TIMEOUT", "30s", "how long a request body may take to arrive, from its request's start (a 25 MB GitHub delivery takes seconds); slower → 408", false, dur(func(c *config) *time.Duration { return &c.BodyTimeout })},
		{"WAKEGATE_BODIES_PER_CLIENT", "32", "request bodies one client address may have arriving at once; more → 429 (behind a load balancer that does not buffer bodies, every client shares its address)", false, func(c *config, v string) error {
			_, err := fmt.Sscan(v, &c.BodiesPerClient)
			if err != nil || c.BodiesPerClient <= 0 {
				return fmt.Errorf("want a positive integer")
			}
			return nil
		}},
		{"WAKEGATE_SECRETS_FILE", "", "serve with no secrets: where generated secrets are written when stdout is not a terminal (default: a 0600 file in the temp dir)", false, str(func(c *config) *string { return &c.SecretsFile })},
		{"WAKEGATE_LOG_LEVEL", "info", "debug, info, warn or error", false, str(func(c *config) *string { return &c.LogLevel })},
		{"WAKEGATE_CPU_PROFILE", "", "write a CPU profile of the whole run to this file (go tool pprof); wakegate bench sets it with --profile", false, str(func(c *config) *string { return &c.CPUProfile })},
		{"WAKEGATE_ALLOW_PRIVATE_ENDPOINTS", "false", "let push endpoints reach loopback and private addresses (tests, development)", false, func(c *config, v string) error {
			b, err := strconv.ParseBool(v)
			if err != nil {
				return fmt.Errorf("want true or false")
			}
			c.AllowPrivateEndpoints = b
			return nil
		}},
		{"WAKEGATE_PUSH_RETRY", tasks.DefaultSchedule, "delays between push attempts, each ±20 % jitter", false, func(c *config, v string) error {
			d, err := tasks.ParseSchedule(v)
			c.PushRetry = d
			return err
		}},
		{"WAKEGATE_PUSH_QUEUES", strconv.Itoa(tasks.DefaultQueues), "Asynq queues the push, hold-release and escalation tasks are spread over, by recipient (each is one Redis Cluster slot)", false, func(c *config, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > tasks.MaxQueues {
				return fmt.Errorf("want an integer from 1 to %d", tasks.MaxQueues)
			}
			c.PushQueues = n
			return nil
		}},
	}
}

func flagName(env string) string {
	return strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(env, "WAKEGATE_")), "_", "-")
}

// parseConfig applies defaults, then the environment (and <NAME>_FILE for
// secrets), then flags.
func parseConfig(fs *flag.FlagSet, args []string, getenv func(string) string) (*config, error) {
	c := &config{}
	all := settings()
	flags := map[string]*string{}
	for _, s := range all {
		if !s.secret {
			flags[s.env] = fs.String(flagName(s.env), "", s.help+" ("+s.env+", default "+quoteDefault(s.def)+")")
		}
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	for _, s := range all {
		v := s.def
		if e := getenv(s.env); e != "" {
			v = e
		} else if s.secret {
			if path := getenv(s.env + "_FILE"); path != "" {
				b, err := os.ReadFile(path)
				if err != nil {
					return nil, fmt.Errorf("%s_FILE: %w", s.env, err)
				}
				v = strings.TrimSpace(string(b))
			}
		}
		if f := flags[s.env]; f != nil && *f != "" {
			v = *f
		}
		if err := s.set(c, v); err != nil {
			return nil, fmt.Errorf("%s=%q: %w", s.env, v, err) // secrets' setters never fail
		}
	}
	if !event.ValidID(c.RedisPrefix) {
		return nil, fmt.Errorf("WAKEGATE_REDIS_PREFIX must match ^[A-Za-z0-9._-]{1,128}$")
	}
	if _, err := github.ParseWorkspaces(c.Workspaces, event.ValidWorkspace); err != nil {
		return nil, fmt.Errorf("WAKEGATE_WORKSPACES: %w", err)
	}
	if _, err := github.ParseRequiredChecks(c.RequiredChecks); err != nil {
		return nil, fmt.Errorf("WAKEGATE_REQUIRED_CHECKS: %w", err)
	}
	if _, err := parseBytes(c.MaxBody); err != nil {
		return nil, fmt.Errorf("WAKEGATE_MAX_BODY: %w", err)
	}
	if c.GitHubAppKey != "" {
		// Checked here so that a bad App setting stops the start, not a
		// sweep hours later. The errors never quote the key.
		if _, err := strconv.ParseInt(c.GitHubAppID, 10, 64); err != nil {
			return nil, fmt.Errorf("WAKEGATE_GITHUB_APP_ID: the App's numeric id is required with WAKEGATE_GITHUB_APP_PRIVATE_KEY")
		}
		if _, err := app.NewClient(c.gitHubApp()); err != nil {
			return nil, fmt.Errorf("WAKEGATE_GITHUB_APP_PRIVATE_KEY or WAKEGATE_GITHUB_API_URL: %w", err)
		}
	}
	return c, nil
}

// gitHubApp is the App's configuration; without a key the App is off.
func (c *config) gitHubApp() app.Config {
	return app.Config{AppID: c.GitHubAppID, PrivateKey: []byte(c.GitHubAppKey), APIURL: c.GitHubAPIURL}
}

// pemNewlines restores a PEM key given on one line with literal "\n"
// sequences, a common way to put one in an environment variable.
func pemNewlines(v string) string {
	if strings.Contains(v, "\n") {
		return v
	}
	return strings.ReplaceAll(v, `\n`, "\n")
}

func quoteDefault(d string) string {
	if d == "" {
		return "none"
	}
	return d
}

// parseBytes reads sizes such as 25MB, 512KB or 1048576.
func parseBytes(v string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}, {"B", 1}}
	s := strings.ToUpper(strings.TrimSpace(v))
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	var n int64
	if _, err := fmt.Sscan(s, &n); err != nil || n <= 0 {
		return 0, fmt.Errorf("%q: want a size such as 25MB", v)
	}
	return n * mult, nil
}
