// Package stack assembles wakegate's pipeline from its parts: the stores
// on one Redis, the worker components (derive, route, the settler, sweeps,
// the Asynq server of pushes and hold releases) and the gateway. `wakegate
// serve|gateway|worker` and the performance harness (integration/perf)
// both build wakegate here, so what is measured is what runs.
package stack

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/dashboard"
	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/ratelimit"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/providers/github/app"
	"github.com/wakegate/wakegate/workers/derive"
	"github.com/wakegate/wakegate/workers/ghapp"
	"github.com/wakegate/wakegate/workers/health"
	"github.com/wakegate/wakegate/workers/route"
	"github.com/wakegate/wakegate/workers/schedule"
	"github.com/wakegate/wakegate/workers/tasks"
)

// Config is what the assembly needs; zero values take each part's
// default.
type Config struct {
	Prefix         string        // WAKEGATE_REDIS_PREFIX
	Shards         int           // WAKEGATE_SHARDS
	Retention      time.Duration // WAKEGATE_RETENTION
	JournalMaxLen  int64         // WAKEGATE_JOURNAL_MAXLEN
	RequiredChecks string        // WAKEGATE_REQUIRED_CHECKS
	ReadySettle    time.Duration // WAKEGATE_READY_SETTLE
	SessionTTL     time.Duration // WAKEGATE_SESSION_TTL
	PushRetry      []time.Duration
	PushQueues     int // WAKEGATE_PUSH_QUEUES
	// AllowPrivateEndpoints lets pushes reach loopback and private
	// networks (WAKEGATE_ALLOW_PRIVATE_ENDPOINTS).
	AllowPrivateEndpoints bool
	Workspaces            string // WAKEGATE_WORKSPACES; default "*=default"
	// GitHubApp is the App (WAKEGATE_GITHUB_APP_ID, …_PRIVATE_KEY,
	// WAKEGATE_GITHUB_API_URL); without a private key the App features
	// are off.
	GitHubApp app.Config
	// The health sweep (docs/design.md §9, §11): WAKEGATE_MAX_TURN (default 1h),
	// WAKEGATE_PR_STUCK_AFTER (6h), WAKEGATE_HEALTH_EVERY (its period, 1m).
	MaxTurn, PRStuckAfter, HealthEvery time.Duration
	// MaxSubscriptions caps the live subscriptions of one party
	// (WAKEGATE_MAX_SUBSCRIPTIONS; default 1,000).
	MaxSubscriptions int
	// WorkerID is this worker's identity among the route consumers
	// (WAKEGATE_WORKER_ID; default: the host name, docs/design.md §9).
	WorkerID string
}

// Stack is wakegate's state on one Redis and the parts that work on it.
type Stack struct {
	Redis     redis.UniversalClient
	Log       *slog.Logger
	Metrics   *prometheus.Registry
	Journal   *journal.Journal
	Ingest    *ingest.Store
	Tracker   *tracker.Tracker
	Sessions  *sessions.Registry
	Subs      *subscriptions.Store
	Sup       *supervision.Store
	Inbox     *inbox.Inbox
	Endpoints *outbound.Endpoints
	Push      *tasks.Pusher
	Holds     *holds.Store
	Release   *tasks.Releaser
	prefix    string
	Escalate  *tasks.Escalator
	Health    *health.Sweeper
	GitHub    *GitHubApp // nil without a GitHub App
	// Router routes journaled events (the workers' consumer) and redelivers
	// them (the gateway's POST /admin/events/{id}/redeliver): one per
	// stack, its metrics registered once.
	Router *route.Router

	healthEvery time.Duration // WAKEGATE_HEALTH_EVERY
	workerID    string        // WAKEGATE_WORKER_ID
	dashboard   dashboard.Config
}

// New assembles the stores on rdb. Metrics are registered on reg.
func New(rdb redis.UniversalClient, cfg Config, log *slog.Logger, reg *prometheus.Registry) (*Stack, error) {
	required, err := github.ParseRequiredChecks(cfg.RequiredChecks)
	if err != nil {
		return nil, err
	}
	s := &Stack{Redis: rdb, Log: log, Metrics: reg, prefix: cfg.Prefix, workerID: cfg.WorkerID}
	reg.MustRegister(redisUp(rdb))
	configured := func(repo string) []string {
		names, _ := required.Lookup(repo)
		return names
	}
	requiredOf := func(repo, _ string) []string { return configured(repo) }
	if s.GitHub, err = newGitHubApp(rdb, cfg, configured, log, reg); err != nil {
		return nil, err
	}
	if s.GitHub == nil {
		ghapp.RegisterOffMetrics(reg) // the alert rules' series, at zero
	}
	if s.GitHub != nil {
		requiredOf = s.GitHub.Required.Lookup // branch protection ∪ rulesets ∪ configured
	}
	undecodable := prometheus.NewCounter(prometheus.CounterOpts{Name: "wakegate_journal_undecodable_entries_total",
		Help: "Journal entries a reader skipped because they cannot be decoded (each counted once per process)."})
	reg.MustRegister(undecodable)
	s.Journal = journal.New(rdb, journal.Config{Prefix: cfg.Prefix, Shards: cfg.Shards, Retention: cfg.Retention, MaxLen: cfg.JournalMaxLen,
		Undecodable: func(seq, reason string) {
			undecodable.Inc()
			log.Warn("journal: skipped an undecodable entry; readers pass over it", "seq", seq, "reason", reason)
		}})
	s.Sessions = sessions.New(rdb, s.Journal, cfg.SessionTTL)
	s.Tracker = tracker.New(rdb, s.Journal, tracker.Config{Settle: cfg.ReadySettle, Required: requiredOf, KnownSession: s.Sessions.Known})
	s.Ingest = ingest.New(rdb, s.Journal)
	s.Subs = subscriptions.New(rdb, cfg.Prefix).WithMaxPerParty(cfg.MaxSubscriptions)
	s.Sup = supervision.New(rdb, cfg.Prefix, func(ctx context.Context, ws, party string) (bool, error) {
		p, err := s.Sessions.Get(ctx, ws, party, time.Now())
		return err == nil && p.Liveness == sessions.Dead, err
	})
	s.Inbox = inbox.New(rdb, inbox.Config{Prefix: cfg.Prefix, Retention: cfg.Retention})
	// Pushes (docs/design.md §8) ride Asynq on the same Redis, in the
	// queues <prefix>:push and <prefix>:push:<k>, by recipient.
	guard := &outbound.Guard{AllowPrivate: cfg.AllowPrivateEndpoints}
	s.Endpoints = outbound.NewEndpoints(rdb, cfg.Prefix, guard)
	s.Push = tasks.New(rdb, asynq.NewClientFromRedisClient(rdb), s.Inbox, s.Endpoints, log, reg,
		tasks.Config{Prefix: cfg.Prefix, Schedule: cfg.PushRetry, Guard: guard, Queues: cfg.PushQueues})
	// Presence, quiet and the rate cap (docs/design.md §6–§7); their digests ride
	// the push queue.
	s.Holds = holds.New(rdb, cfg.Prefix)
	s.Release = tasks.NewReleaser(s.Push, s.Holds, func(ctx context.Context, ws string) (time.Duration, int, error) {
		st, err := s.Sup.Settings(ctx, ws)
		return time.Duration(st.Rate.Per), st.Rate.Burst, err
	})
	// A wake decided at a push's 2xx (an entry that folded past its push,
	// docs/design.md §7) passes the same holds as one the router decides.
	s.Push.WithRewake(func(ctx context.Context, ws, party string, res inbox.Result, e *event.Event) (bool, error) {
		now := time.Now()
		st, err := s.Sup.Settings(ctx, ws)
		if err != nil {
			return false, err
		}
		states, err := s.Holds.Lookup(ctx, ws, []string{party}, now)
		if err != nil {
			return false, err
		}
		state := states[party]
		if state.Presence.Attended(now) && inbox.AttendedKind(e) != event.KindAlert {
			return false, nil // attended: the notice rides the next read, as a first one would
		}
		dec, err := s.Holds.Decide(ctx, holds.Request{Workspace: ws, Party: party, Result: res, Event: e,
			Settings: st, Presence: state.Presence, Quiet: &state.Quiet, Now: now})
		if err != nil || dec.Push {
			return dec.Push, err
		}
		if !dec.Due.IsZero() {
			return false, s.Release.Schedule(ctx, ws, party, dec.Reason, dec.Due)
		}
		return false, nil
	})
	// Escalation (docs/design.md §8): one timer per recipient on the push queue;
	// it hooks itself into the pusher's dead letters.
	s.Escalate = tasks.NewEscalator(s.Push, s.Release, s.Sessions, s.Sup, s.Journal, log, reg)
	// The health sweep (docs/design.md §9): the workers run it periodically, the
	// gateway on GET /v1/health/supervision.
	s.Health = health.New(health.Deps{Redis: rdb, Journal: s.Journal, Sessions: s.Sessions, Subs: s.Subs, Sup: s.Sup,
		Inbox: s.Inbox, Endpoints: s.Endpoints, Tracker: s.Tracker, Escalator: s.Escalate, Log: log, Registerer: reg},
		health.Config{Prefix: cfg.Prefix, SessionTTL: cfg.SessionTTL, MaxTurn: cfg.MaxTurn, StuckAfter: cfg.PRStuckAfter,
			Spread: healthEvery(cfg) / 2})
	s.healthEvery = healthEvery(cfg)
	s.Router = route.NewRouter(rdb, s.Journal, s.Sessions, s.Subs, s.Sup, s.Inbox, reg).
		WithPusher(s.Push).WithHolds(s.Holds, s.Release).WithEscalation(s.Escalate)
	if s.GitHub != nil {
		s.GitHub.reconciler(s)
	}
	return s, nil
}

// Workers returns what a worker runs: the deriver (ingest → journal), the
// router's consumer (journal → inboxes, pushes, holds), the settler, the
// once-a-minute subscription sweep and trims, and the Asynq server of the
// push queue (pushes, hold releases, escalation timers). ready reports
// whether the deriver's consumers and the router's heartbeat are running.
// Run them with Run for an ordered stop (WorkerComponents).
func (s *Stack) Workers() (components []func(context.Context) error, ready func() error) {
	named, ready := s.WorkerComponents()
	for _, c := range named {
		components = append(components, c.Run)
	}
	return components, ready
}

// WorkerComponents is Workers, each part named and staged for Run: the
// consumers stop before the queue they feed (docs/design.md §11).
func (s *Stack) WorkerComponents() (components []Component, ready func() error) {
	d := derive.New(s.Redis, s.Ingest, s.Tracker, s.Log, s.Metrics, derive.Config{})
	asynqServer := tasks.NewServer(s.Redis, s.Push, s.Release, s.Log)
	// Once a minute across all workers (one pass per tick, whoever claims
	// it): close expired subscriptions, trim the journal and raw deliveries.
	periodic := schedule.New(s.Redis, s.prefix, processName(), s.Log, s.Metrics)
	periodic.Every("sweep-subscriptions", time.Minute, func(ctx context.Context, now time.Time) error {
		_, err := s.Subs.Sweep(ctx, now)
		return err
	})
	// A batch of agent events across shards whose gateway stopped between
	// its commit and its fan-out (docs/design.md §4) is applied here.
	periodic.Every("agent-batches", 10*time.Second, func(ctx context.Context, now time.Time) error {
		_, err := s.Ingest.RecoverBatches(ctx, now, 30*time.Second)
		return err
	})
	periodic.Every("trim-journal", time.Minute, func(ctx context.Context, now time.Time) error {
		return errors.Join(s.Journal.Trim(ctx, now), s.Ingest.Trim(ctx, now))
	})
	// The health sweep (docs/design.md §9): invariants, repairs, session.stalled
	// and github.pull_request.stuck.
	periodic.Every("health", s.healthEvery, s.Health.Pass)
	asynqServer.Handle(tasks.TypeEscalate, s.Escalate)
	// Scraped, not pushed: they read Redis when Prometheus asks, so they
	// do not freeze when work stops.
	s.Metrics.MustRegister(route.NewLagCollector(s.Redis, s.Journal), tasks.NewQueueCollector(s.Redis, s.Push))
	consumer := route.NewConsumer(s.Redis, s.Journal, s.Router.Handle, s.Log, s.Metrics, route.ConsumerConfig{WorkerID: s.workerID})
	components = []Component{
		{"derive", StageConsumers, d.Run},
		{"route", StageConsumers, consumer.Run},
		{"settler", StageConsumers, s.Tracker.RunSettler},
		{"periodic", StageConsumers, periodic.Run},
		{"asynq", StageQueue, asynqServer.Run},
	}
	if s.GitHub != nil {
		// The missed-delivery sweep and the reconciliation, each once per
		// period across workers.
		periodic.Every("github-sweep", s.GitHub.Sweep.Every(), s.GitHub.Sweep.Tick)
		periodic.Every("github-reconcile", s.GitHub.Reconcile.Every(), s.GitHub.Reconcile.Tick)
	}
	// Ready while the deriver's consumers and the router's heartbeat run.
	return components, func() error { return errors.Join(d.Healthy(), consumer.Healthy()) }
}

// Gateway returns the gateway on the stack: cfg is its own configuration,
// verifier checks agent tokens, ready is a co-located worker's readiness
// (nil for a gateway alone).
func (s *Stack) Gateway(cfg gateway.Config, verifier *agent.Verifier, ready func() error) (*gateway.Server, error) {
	deps := gateway.Deps{
		Log: s.Log, Redis: s.Redis, Journal: s.Journal, Ingest: s.Ingest, Sessions: s.Sessions, Linker: s.Tracker,
		Verifier: verifier, Subs: s.Subs, Sup: s.Sup, Inbox: s.Inbox,
		Registry: s.Metrics, Gatherer: s.Metrics, Ready: ready,
		Endpoints: s.Endpoints, DeadLetters: s.Push,
		Holds: s.Holds, Releaser: s.Release, Health: s.Health,
		Limiter:   ratelimit.New(s.Redis, s.prefix, ratelimit.Limits{Workspace: cfg.Limits.Workspace, Token: cfg.Limits.Token}),
		Dashboard: s.dashboardReader(), // dashboard.go
	}
	deps.DeliveryRedeliverer, deps.EventRedeliverer = s.redeliverers() // redeliver.go
	if s.GitHub != nil {
		deps.Linker = watchingLinker{s.Tracker, s.GitHub.Reconcile, s.Log}
		deps.GitHubSweep, deps.GitHubBaseline = s.GitHub.Sweep, s.GitHub.Reconcile
	}
	return gateway.New(cfg, deps)
}

// processName names this process (host and pid) for a person reading
// Redis.
func processName() string {
	h, _ := os.Hostname()
	return h + "/" + strconv.Itoa(os.Getpid())
}

// healthEvery is the period of the health sweep (WAKEGATE_HEALTH_EVERY).
func healthEvery(cfg Config) time.Duration {
	if cfg.HealthEvery <= 0 {
		return time.Minute
	}
	return cfg.HealthEvery
}
