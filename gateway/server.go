// Package gateway is wakegate's HTTP front door and the only package that
// imports gin: it verifies GitHub webhooks and agents' JWTs, commits what
// they send (package ingest) before answering, and serves the journal.
// It imports providers and delivery; nothing imports it but cmd.
package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/hibiken/asynqmon"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/dashboard"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/github"
)

// Config of the gateway. Zero values take the documented defaults.
type Config struct {
	Addr           string   // listen address, default ":8080"
	WebhookSecrets [][]byte // accepted webhook secrets; required
	AppID          string   // GitHub App id: X-GitHub-Hook-Installation-Target-ID must match
	Workspaces     *github.RepoMap[string]
	MaxBody        int64 // default 25 MB
	InflightBytes  int64 // bytes of bodies in flight before 503; default 256 MiB
	// BodyTimeout bounds the arrival of a whole request body, from its
	// request's start (WAKEGATE_BODY_TIMEOUT); default 30s.
	BodyTimeout time.Duration
	// BodiesPerClient bounds the request bodies one client address has
	// unfinished at once (WAKEGATE_BODIES_PER_CLIENT); default 32.
	BodiesPerClient int
	Limits          Limits        // ingest rate limits
	TokenSecret     []byte        // HS256 secret to mint child tokens; nil disables the route
	TokenIssuer     string        // iss of minted child tokens: WAKEGATE_JWT_ISSUER, so the verifier accepts them
	CommitTimeout   time.Duration // bound on a commit before 503; default 2.5s (GitHub gets an answer within 3s)
	PresenceTTL     time.Duration // how long PUT /v1/presence attends without "for"; default 30m (WAKEGATE_PRESENCE_TTL)
	// OperatorPassword opens /monitor/ with HTTP Basic (user operator),
	// for a browser (WAKEGATE_OPERATOR_PASSWORD_FILE); empty: tokens only.
	OperatorPassword []byte
	Now              func() time.Time
}

// Deps are what the gateway works with.
type Deps struct {
	Log      *slog.Logger
	Redis    redis.UniversalClient
	Journal  *journal.Journal
	Ingest   *ingest.Store
	Sessions *sessions.Registry
	Linker   ingest.Linker // PR claims (package tracker)
	Verifier *agent.Verifier
	Subs     *subscriptions.Store
	Sup      *supervision.Store
	Inbox    *inbox.Inbox
	Registry prometheus.Registerer
	Gatherer prometheus.Gatherer
	Ready    func() error // extra readiness checks (workers heartbeating); nil = none
	// Limiter keeps the ingest rate limits (docs/design.md §4) for the whole
	// deployment; nil: unlimited.
	Limiter ingestLimiter

	// Endpoints are the push endpoints; nil serves no /v1/endpoints.
	Endpoints endpointStore
	// DeadLetters are the pushes that never got through; nil serves no
	// /admin/dead-letters.
	DeadLetters deadLetters
	// Holds are presence and quiet; nil serves no /v1/presence nor
	// /v1/quiet. Releaser lifts quiet and schedules the ends of holds; nil
	// serves no /v1/quiet.
	Holds    holdStore
	Releaser holdReleaser

	// GitHubSweep and GitHubBaseline are the GitHub App's (nil without
	// one): POST /admin/github/redeliver-failed, and the baseline fetch of
	// a PR subscribed to.
	GitHubSweep    githubSweeper
	GitHubBaseline githubBaseline

	// Health runs the health sweep's checks (package workers/health); nil
	// serves no /v1/health/supervision.
	Health healthReporter

	// DeliveryRedeliverer and EventRedeliverer are the operators'
	// redeliveries (docs/design.md §11; admin_redeliver.go); nil serves no
	// /admin/deliveries/{guid}/redeliver, resp. /admin/events/{id}/redeliver.
	DeliveryRedeliverer deliveryRedeliverer
	EventRedeliverer    eventRedeliverer

	// Dashboard reads the supervision dashboard's views (package
	// dashboard); nil serves no /ui/.
	Dashboard *dashboard.Reader
}

// Server is the gateway.
type Server struct {
	cfg      Config
	deps     Deps
	log      *slog.Logger
	metrics  *metrics
	notifier *fanout // journal appends, per workspace
	inboxes  *fanout // inbox updates, per party
	inflight atomic.Int64
	bodies   *bodyCounter // unfinished bodies per client address
	logins   *loginThrottle
	resolver *ingest.Resolver // lineage and PR claims before a push's commit
	ready    atomic.Bool
	stopping chan struct{} // closed when Run begins to stop: long-polls answer at once
	handler  http.Handler
	monitor  *asynqmon.HTTPHandler // /monitor/; nil when the Redis client is of another kind
	addr     atomic.Value          // string
	uiKey    []byte                // keys the dashboard's CSRF tokens
}

// New builds a gateway.
func New(cfg Config, deps Deps) (*Server, error) {
	if len(cfg.WebhookSecrets) == 0 {
		return nil, errors.New("gateway: no webhook secret configured (WAKEGATE_GITHUB_WEBHOOK_SECRETS)")
	}
	if cfg.Addr == "" {
		cfg.Addr = ":8080"
	}
	if cfg.MaxBody <= 0 {
		cfg.MaxBody = 25 << 20
	}
	if cfg.InflightBytes <= 0 {
		cfg.InflightBytes = 256 << 20
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = 30 * time.Second
	}
	if cfg.BodiesPerClient <= 0 {
		cfg.BodiesPerClient = 32
	}
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 2500 * time.Millisecond
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.PresenceTTL <= 0 {
		cfg.PresenceTTL = 30 * time.Minute
	}
	if cfg.Workspaces == nil {
		cfg.Workspaces, _ = github.ParseWorkspaces("*=default", func(string) bool { return true })
	}
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	if deps.Registry == nil {
		r := prometheus.NewRegistry()
		deps.Registry, deps.Gatherer = r, r
	}
	s := &Server{
		cfg:      cfg,
		deps:     deps,
		log:      deps.Log.With("component", "gateway"),
		metrics:  newMetrics(deps.Registry),
		notifier: journalFanout(deps.Redis, deps.Journal.NotifyChannel(""), deps.Log),
		bodies:   &bodyCounter{n: map[string]int{}, max: cfg.BodiesPerClient},
		logins:   newLoginThrottle(cfg.Now),
		resolver: ingest.NewResolver(deps.Sessions, deps.Linker, cfg.Workspaces),
	}
	if deps.Inbox != nil {
		s.inboxes = inboxFanout(deps.Redis, deps.Inbox, deps.Log)
	}
	s.monitor = newMonitor(deps.Redis)
	s.ready.Store(true)
	s.stopping = make(chan struct{})
	s.handler = s.routes()
	return s, nil
}

// Handler serves the gateway's routes.
func (s *Server) Handler() http.Handler { return s.handler }

// Addr is the address the server listens on once Run has started.
func (s *Server) Addr() string {
	a, _ := s.addr.Load().(string)
	return a
}

// SetReady flips /readyz; shutdown turns it off first.
func (s *Server) SetReady(ok bool) { s.ready.Store(ok) }

// Run serves until ctx is cancelled, then stops taking requests and lets
// in-flight ones finish (bounded by 10 s).
func (s *Server) Run(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return err
	}
	s.addr.Store(ln.Addr().String())
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	nctx, stopNotifier := context.WithCancel(context.Background())
	notifierDone := make(chan struct{})
	go func() { defer close(notifierDone); s.runNotifiers(nctx) }()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	s.log.Info("gateway listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		stopNotifier()
		<-notifierDone
		return err
	case <-ctx.Done():
	}
	s.SetReady(false)
	close(s.stopping) // open long-polls and streams answer with what they have
	sctx, cancel := context.WithTimeout(context.Background(), drainBound)
	defer cancel()
	stopNotifier()
	err = srv.Shutdown(sctx)
	if errors.Is(err, context.DeadlineExceeded) {
		// A bounded drain is a normal stop (docs/design.md §11): what is
		// still open (a client stalled mid-body) is cut.
		s.log.Warn("drain bound reached; closing the connections still open", "bound", drainBound.String())
		_ = srv.Close()
		err = nil
	}
	<-notifierDone
	if s.monitor != nil {
		_ = s.monitor.Close()
	}
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// drainBound is how long a stopping gateway waits for its requests in
// flight to finish before it closes what is left.
const drainBound = 10 * time.Second

const (
	requestIDKey = "request_id"
	problemKey   = "problem"
	claimsKey    = "claims"
)

func (s *Server) routes() http.Handler {
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.HandleMethodNotAllowed = true
	// Routes match the path as sent, so a parameter may hold an escaped
	// '/' (event ids do: POST /admin/events/{id}/redeliver); parameters
	// are unescaped as before.
	r.UseRawPath = true
	r.Use(s.observe, s.recoverPanic, s.guardBody)
	r.NoRoute(func(c *gin.Context) { abort(c, newProblem(http.StatusNotFound, "not-found", "no such route")) })
	r.NoMethod(func(c *gin.Context) {
		abort(c, newProblem(http.StatusMethodNotAllowed, "method-not-allowed", "method not allowed on this route"))
	})

	r.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"status": "ok"}) })
	r.GET("/readyz", s.readyz)
	r.GET("/metrics", gin.WrapH(promhttp.HandlerFor(s.deps.Gatherer, promhttp.HandlerOpts{})))

	r.POST("/webhooks/github", s.githubWebhook)

	v1 := r.Group("/v1", s.authenticate)
	v1.POST("/events", s.requireScope("events:push"), s.pushEvents)
	v1.GET("/events", s.requireScope("events:read"), s.readEvents)
	v1.POST("/sessions/:id/token", s.requireScope("spawn"), s.childToken)

	// Who hears it (docs/design.md §5–§7).
	v1.GET("/inbox", s.requireScope("inbox"), s.getInbox)
	v1.GET("/inbox/stream", s.requireScope("inbox"), s.streamInbox)
	v1.POST("/inbox/ack", s.requireScope("inbox"), s.ackInbox)
	v1.GET("/brief", s.requireScope("inbox"), s.brief)
	v1.POST("/subscriptions", s.requireScope("subscribe"), s.createSubscription)
	v1.GET("/subscriptions", s.requireScope("subscribe"), s.listSubscriptions)
	v1.DELETE("/subscriptions/:id", s.requireScope("subscribe"), s.deleteSubscription)
	v1.POST("/sessions/:id/supervise", s.requireScope("supervise"), s.supervise)
	v1.DELETE("/sessions/:id/supervise", s.requireScope("supervise"), s.release)
	v1.GET("/sessions/:id/supervision", s.requireScope("supervise"), s.supervision)
	v1.POST("/sessions/:id/messages", s.requireScope("events:push"), s.sendMessage)
	v1.GET("/workspace/supervision", s.requireScope("admin"), s.getWorkspaceSupervision)
	v1.PUT("/workspace/supervision", s.requireScope("admin"), s.putWorkspaceSupervision)
	s.healthRoutes(v1)
	s.holdRoutes(v1) // presence and quiet (docs/design.md §6)
	s.mcpRoutes(r)   // the same, as MCP tools (docs/design.md §10)

	// Operators, every workspace (docs/design.md §10).
	admin := r.Group("/admin", s.authenticate, s.requireScope("operator"))
	s.endpointRoutes(v1, admin)
	s.githubRoutes(admin)
	s.redeliverRoutes(admin)
	s.monitorRoutes(r)
	s.dashboardRoutes(r) // /ui/ (docs/design.md §10, §11)
	return r
}

func (s *Server) readyz(c *gin.Context) {
	if !s.ready.Load() {
		abort(c, unavailable("shutting down"))
		return
	}
	ctx, cancel := context.WithTimeout(c.Request.Context(), time.Second)
	defer cancel()
	if err := s.deps.Redis.Ping(ctx).Err(); err != nil {
		abort(c, unavailable("redis unreachable"))
		return
	}
	if s.deps.Ready != nil {
		if err := s.deps.Ready(); err != nil {
			abort(c, unavailable(err.Error()))
			return
		}
	}
	c.JSON(http.StatusOK, gin.H{"status": "ready"})
}

// observe assigns a request id, logs and counts every request.
func (s *Server) observe(c *gin.Context) {
	start := time.Now()
	id := c.GetHeader("X-Request-Id")
	if id == "" || len(id) > 64 {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	c.Set(requestIDKey, id)
	c.Header("X-Request-Id", id)
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unmatched"
	}
	status := c.Writer.Status()
	s.metrics.requests.WithLabelValues(route, statusClass(status)).Inc()
	s.metrics.latency.WithLabelValues(route).Observe(time.Since(start).Seconds())
	if status >= 500 {
		s.log.Warn("request failed", "route", route, "status", status, "request_id", id,
			"problem", c.GetString(problemKey), "duration_ms", time.Since(start).Milliseconds())
	} else {
		s.log.Debug("request", "route", route, "status", status, "request_id", id)
	}
}

func (s *Server) recoverPanic(c *gin.Context) {
	defer func() {
		if v := recover(); v != nil {
			s.log.Error("handler panic", "route", c.FullPath(), "request_id", c.GetString(requestIDKey), "panic", v)
			s.metrics.panics.Inc()
			abort(c, newProblem(http.StatusInternalServerError, "internal", "internal error"))
		}
	}()
	c.Next()
}

func statusClass(code int) string {
	return string(rune('0'+code/100)) + "xx"
}

// runNotifiers holds the Pub/Sub subscriptions long-polls wait on, until
// ctx is cancelled.
func (s *Server) runNotifiers(ctx context.Context) {
	done := make(chan struct{})
	if s.inboxes != nil {
		go func() { defer close(done); s.inboxes.Run(ctx) }()
	} else {
		close(done)
	}
	s.notifier.Run(ctx)
	<-done
}

// isStopping reports whether the server has begun to stop.
func (s *Server) isStopping() bool {
	select {
	case <-s.stopping:
		return true
	default:
		return false
	}
}

// commitContext bounds a commit so an unreachable Redis answers 503 in time.
func (s *Server) commitContext(c *gin.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(c.Request.Context(), s.cfg.CommitTimeout)
}
