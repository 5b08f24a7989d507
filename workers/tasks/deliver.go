package tasks

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/providers/event"
)

// TypeDeliver is the Asynq task type of one push.
const TypeDeliver = "push:deliver"

// DefaultSchedule is WAKEGATE_PUSH_RETRY's default: the delays between
// attempts, about three days in all.
const DefaultSchedule = "5s,5m,30m,2h,5h,10h,14h,20h,24h"

// ParseSchedule reads a comma-separated list of positive durations (at
// most 50).
func ParseSchedule(s string) ([]time.Duration, error) {
	var out []time.Duration
	for _, f := range strings.Split(s, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(f))
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("%q: want positive durations such as 5s,5m,30m", strings.TrimSpace(f))
		}
		out = append(out, d)
	}
	if len(out) > 50 {
		return nil, fmt.Errorf("at most 50 delays, got %d", len(out))
	}
	return out, nil
}

// Config of the pusher. Zero values take the defaults.
type Config struct {
	// Prefix is WAKEGATE_REDIS_PREFIX. Default keyspace.DefaultPrefix.
	Prefix string
	// Schedule is the delays between attempts (WAKEGATE_PUSH_RETRY):
	// a push gets len(Schedule)+1 attempts. Default DefaultSchedule.
	Schedule []time.Duration
	// Timeout bounds one attempt, connection to answer. Default 10s.
	Timeout time.Duration
	// Breaker tunes the per-endpoint circuit breaker.
	Breaker outbound.BreakerConfig
	// Guard keeps pushes off internal networks; nil refuses every private
	// address.
	Guard *outbound.Guard
	// PerEndpoint bounds the attempts in flight to one endpoint in this
	// process, so an endpoint that hangs holds at most that many of the
	// server's workers; more are deferred a second, consuming no attempt.
	// Default 8.
	PerEndpoint int
	// Queues is how many Asynq queues the tasks are spread over, by
	// recipient (WAKEGATE_PUSH_QUEUES, queues.go). Default DefaultQueues.
	Queues int
}

// enqueuer is the part of *asynq.Client the pusher uses.
type enqueuer interface {
	EnqueueContext(ctx context.Context, task *asynq.Task, opts ...asynq.Option) (*asynq.TaskInfo, error)
}

// Pusher enqueues pushes and is the Asynq handler that sends them. It is
// safe for concurrent use.
type Pusher struct {
	cfg       Config
	queues    []string // QueueOf picks a recipient's
	rdb       redis.UniversalClient
	client    enqueuer
	box       *inbox.Inbox
	endpoints *outbound.Endpoints
	breaker   *outbound.Breaker
	dead      *outbound.DeadLetters
	http      *http.Client
	log       *slog.Logger
	m         *metrics
	now       func() time.Time
	// onDeadLetter is told of every dead letter (the Escalator hooks
	// itself in): its entries escalate at once (docs/design.md §8).
	onDeadLetter func(ctx context.Context, workspace, party, ck string, seqs []int64) error
	inflight     inflight
	// rewake decides whether a wake decided when a push's 2xx found its
	// entry folded past it is pushed now (the holds, docs/design.md §7); nil:
	// always.
	rewake Rewake
}

// Rewake takes the holds decision for a wake that Inbox.Pushed decided:
// push reports whether to push it now (a held one is the holds' to
// release).
type Rewake func(ctx context.Context, workspace, party string, res inbox.Result, e *event.Event) (push bool, err error)

// WithRewake sets the holds decision of the wakes decided at a push's
// 2xx (see caughtUp).
func (p *Pusher) WithRewake(f Rewake) *Pusher {
	p.rewake = f
	return p
}

// caughtUp finishes a human: party's wake push that got its 2xx (docs/design.md
// §7): the party is caught up with what the push carried — its entry is
// acked if still at the pushed seq; if the entry folded since, what folded
// in was never sent, and when the wake-again rule kept it a notice it
// decides a wake now and is pushed again, so an entry never waits unacked
// for a push that nothing will send.
func (p *Pusher) caughtUp(ctx context.Context, workspace, party, ck string, seq int64) error {
	res, _, err := p.box.Pushed(ctx, workspace, party, ck, seq, p.now())
	if err != nil || !res.Wake {
		return err
	}
	entry, err := p.box.Get(ctx, workspace, party, ck)
	if err != nil || entry == nil || entry.Seq != res.Seq {
		return err // acked or moved on meanwhile: that update decides for itself
	}
	raw := entry.Latest
	if len(raw) == 0 {
		raw = entry.Event
	}
	var e event.Event
	if err := json.Unmarshal(raw, &e); err != nil {
		return fmt.Errorf("entry %s of %s: %w", ck, party, err)
	}
	if p.rewake != nil {
		push, err := p.rewake(ctx, workspace, party, res, &e)
		if err != nil || !push {
			return err
		}
	}
	p.m.rewakes.Inc()
	return p.Enqueue(ctx, workspace, party, res, &e)
}

// New returns a pusher: client enqueues on rdb's Asynq, box is acked for
// human: parties, endpoints are where pushes go.
func New(rdb redis.UniversalClient, client *asynq.Client, box *inbox.Inbox, endpoints *outbound.Endpoints,
	log *slog.Logger, reg prometheus.Registerer, cfg Config) *Pusher {
	if cfg.Prefix == "" {
		cfg.Prefix = keyspace.DefaultPrefix
	}
	if len(cfg.Schedule) == 0 {
		cfg.Schedule, _ = ParseSchedule(DefaultSchedule)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	if cfg.Guard == nil {
		cfg.Guard = &outbound.Guard{}
	}
	if cfg.Breaker.ProbeFor <= 0 {
		cfg.Breaker.ProbeFor = cfg.Timeout + 5*time.Second
	}
	if cfg.PerEndpoint <= 0 {
		cfg.PerEndpoint = 8
	}
	if cfg.Queues <= 0 {
		cfg.Queues = DefaultQueues
	}
	if log == nil {
		log = slog.Default()
	}
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	tr := &http.Transport{
		Proxy:                 nil, // a proxy would dial for us, past the guard
		DialContext:           cfg.Guard.DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   cfg.Timeout,
		ResponseHeaderTimeout: cfg.Timeout,
	}
	return &Pusher{
		cfg:       cfg,
		queues:    Queues(cfg.Prefix, cfg.Queues),
		rdb:       rdb,
		client:    client,
		box:       box,
		endpoints: endpoints,
		breaker:   outbound.NewBreaker(rdb, cfg.Prefix, cfg.Breaker),
		dead:      outbound.NewDeadLetters(rdb, cfg.Prefix, 0),
		http: &http.Client{Transport: tr, Timeout: cfg.Timeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }},
		log:      log.With("component", "push"),
		m:        newMetrics(reg),
		now:      time.Now,
		inflight: inflight{max: cfg.PerEndpoint, n: map[string]int{}},
	}
}

// inflight counts the attempts in flight per endpoint in this process.
type inflight struct {
	mu  sync.Mutex
	max int
	n   map[string]int
}

// acquire takes a slot for key; ok is false when key has max in flight.
func (f *inflight) acquire(key string) (release func(), ok bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n[key] >= f.max {
		return nil, false
	}
	f.n[key]++
	return func() {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.n[key]--; f.n[key] == 0 {
			delete(f.n, key)
		}
	}, true
}

type metrics struct {
	enqueued prometheus.Counter
	attempts *prometheus.CounterVec
	latency  prometheus.Histogram
	deferred prometheus.Counter
	dropped  *prometheus.CounterVec
	dead     prometheus.Counter
	rewakes  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		enqueued: f.NewCounter(prometheus.CounterOpts{Name: "wakegate_push_enqueued_total",
			Help: "Pushes enqueued (a wake to a party with an endpoint, or a redelivery)."}),
		attempts: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_push_attempts_total",
			Help: "Push attempts by outcome."}, []string{"outcome"}),
		latency: f.NewHistogram(prometheus.HistogramOpts{Name: "wakegate_push_attempt_duration_seconds",
			Help: "Duration of push attempts.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 12)}),
		rewakes: f.NewCounter(prometheus.CounterOpts{Name: "wakegate_push_rewakes_total",
			Help: "Wakes decided at a push's 2xx for an entry that folded past the pushed seq, and pushed again."}),
		deferred: f.NewCounter(prometheus.CounterOpts{Name: "wakegate_push_deferred_total",
			Help: "Push attempts deferred by an open circuit breaker (no attempt consumed)."}),
		dropped: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_push_dropped_total",
			Help: "Pushes not sent, by reason."}, []string{"reason"}),
		dead: f.NewCounter(prometheus.CounterOpts{Name: "wakegate_push_dead_letters_total",
			Help: "Pushes that became dead letters."}),
	}
	for _, o := range []string{"success", "failure", "gone"} {
		m.attempts.WithLabelValues(o)
	}
	for _, r := range []string{"no_endpoint", "disabled", "already_sent", "body_expired"} {
		m.dropped.WithLabelValues(r)
	}
	return m
}

// payload is a push:deliver task's payload. Body travels in the payload
// only between enqueue and ProcessTask's load: enqueue stores it under
// bodyKey and enqueues without it. A task of an older version may still
// carry it, and is sent with it. Body is a string so the bytes signed and
// sent are exactly the bytes fixed at enqueue.
type payload struct {
	Workspace  string `json:"ws"`
	Party      string `json:"party"`
	Seq        int64  `json:"seq"`
	WebhookID  string `json:"webhook_id"`
	Kind       string `json:"kind"`
	Format     string `json:"format"`
	Body       string `json:"body,omitempty"`
	DecidedAt  int64  `json:"decided_at"`           // unix ms
	Redelivery int    `json:"redelivery,omitempty"` // the operator's nth redelivery
	// Seqs are a digest's entries: a human: party's 2xx acks them. CKs,
	// when set, are their coalesce keys (the same order), so an entry that
	// folded past the digest is caught up as a wake's is (caughtUp).
	Seqs []int64  `json:"seqs,omitempty"`
	CKs  []string `json:"cks,omitempty"`
	// CK is a wake's entry (its coalesce key), which escalates at once if
	// the push dead-letters (the entry may have folded past Seq by then).
	CK string `json:"ck,omitempty"`
	// Traceparent and Tracestate are the event's Distributed Tracing
	// extension, passed on as the push's HTTP headers (docs/design.md §4).
	Traceparent string `json:"tp,omitempty"`
	Tracestate  string `json:"ts,omitempty"`
}

// traceHeader is an event's tracing attribute when it can be an HTTP
// header value as it is: printable ASCII, at most 512 bytes.
func traceHeader(e *event.Event, name string) string {
	v := e.Extension(name)
	if len(v) > 512 {
		return ""
	}
	for i := 0; i < len(v); i++ {
		if v[i] < 0x20 || v[i] > 0x7e {
			return ""
		}
	}
	return v
}

// Enqueue enqueues the push of one inbox update that decided a wake, when
// party has an enabled endpoint; it is the router's pusher. The body is
// fixed here; the task id is the webhook-id, derived from the update's
// seq, so calling it again for the same update (a re-run of the routing,
// where Deliver returns the original result) enqueues nothing new.
func (p *Pusher) Enqueue(ctx context.Context, workspace, party string, res inbox.Result, e *event.Event) error {
	if !res.Wake || res.Seq <= 0 {
		return nil
	}
	ep, err := p.endpoints.Get(ctx, workspace, party)
	if err != nil {
		return err
	}
	return p.EnqueueTo(ctx, ep, workspace, party, res, e)
}

// QueueEndpoint queues the read of a party's endpoint on pipe, for
// EnqueueTo (the router reads it with what it reads before delivering).
func (p *Pusher) QueueEndpoint(ctx context.Context, pipe redis.Pipeliner, workspace, party string) func() (*outbound.Endpoint, error) {
	return p.endpoints.QueueGet(ctx, pipe, workspace, party)
}

// EnqueueTo is Enqueue with the party's endpoint already read (nil: none).
func (p *Pusher) EnqueueTo(ctx context.Context, ep *outbound.Endpoint, workspace, party string, res inbox.Result, e *event.Event) error {
	if !res.Wake || res.Seq <= 0 || ep == nil || ep.Disabled() {
		return nil
	}
	id := outbound.WebhookID(p.cfg.Prefix, workspace, party, res.Seq)
	evJSON, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode event %s: %w", e.ID, err)
	}
	entry, err := p.entryAt(ctx, workspace, party, res, e, evJSON)
	if err != nil {
		return err
	}
	body, err := outbound.Render(ep.Format, outbound.Message{WebhookID: id, Kind: res.Kind, Party: party, Entry: entry, Event: evJSON})
	if err != nil {
		return err
	}
	ck := entry.CoalesceKey
	if ck == "" {
		ck = inbox.CoalesceKey(e)
	}
	return p.enqueue(ctx, id, payload{Workspace: workspace, Party: party, Seq: res.Seq, WebhookID: id, Kind: res.Kind,
		Format: ep.Format, Body: string(body), DecidedAt: p.now().UnixMilli(), CK: ck,
		Traceparent: traceHeader(e, "traceparent"), Tracestate: traceHeader(e, "tracestate")})
}

// entryAt is the entry as the update left it; when it has moved on since
// (acked, or folded into a newer seq: a re-run), the event stands for it.
func (p *Pusher) entryAt(ctx context.Context, workspace, party string, res inbox.Result, e *event.Event, evJSON []byte) (*inbox.Entry, error) {
	es, _, err := p.box.List(ctx, workspace, party, res.Seq-1, true, 1)
	if err != nil {
		return nil, err
	}
	if len(es) == 1 && es[0].Seq == res.Seq {
		return &es[0], nil
	}
	pr := e.Priority
	if pr == "" {
		pr = event.DefaultPriority(e.Type, e.Data)
	}
	return &inbox.Entry{Seq: res.Seq, Type: e.Type, Subject: e.Subject, Count: 1, Priority: pr, Kind: res.Kind,
		Summary: e.Summary, FirstAt: e.Time, LastAt: e.Time, Event: evJSON, Latest: evJSON, FoldedIDs: []string{e.ID},
		Wake: true, WakeSeq: res.Seq}, nil
}

// enqueue puts one push task on the queue; a task of the same id already
// there is the same push.
func (p *Pusher) enqueue(ctx context.Context, taskID string, pl payload) error {
	// The body first: a task never runs without it. A body already stored
	// under this webhook-id (a re-run of the routing, a redelivery) stays
	// as it was, byte for byte; its time to live is renewed.
	ttl := p.bodyTTL()
	pipe := p.rdb.Pipeline()
	pipe.SetNX(ctx, p.bodyKey(pl.WebhookID), pl.Body, ttl)
	pipe.Expire(ctx, p.bodyKey(pl.WebhookID), ttl)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("store push body %s: %w", pl.WebhookID, err)
	}
	pl.Body = ""
	b, err := json.Marshal(pl)
	if err != nil {
		return fmt.Errorf("encode push %s: %w", pl.WebhookID, err)
	}
	_, err = p.client.EnqueueContext(ctx, asynq.NewTask(TypeDeliver, b), asynq.TaskID(taskID), asynq.Queue(p.QueueOf(pl.Workspace, pl.Party)),
		asynq.MaxRetry(p.maxRetry()), asynq.Timeout(p.cfg.Timeout+15*time.Second))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("enqueue push %s: %w", pl.WebhookID, err)
	}
	p.m.enqueued.Inc()
	return nil
}

// maxRetry is Asynq's MaxRetry of a push: the schedule, plus one spare.
// Asynq archives a task that fails with Retried ≥ MaxRetry whatever the
// error, before it asks IsFailure; the spare lets the breaker defer the
// last attempt too. The handler itself decides which attempt is the last:
// Retried ≥ len(Schedule).
func (p *Pusher) maxRetry() int { return len(p.cfg.Schedule) + 1 }

func (p *Pusher) sentKey(id string) string { return keyspace.PushSent(p.cfg.Prefix, id) }

// bodyKey holds a push's body, by webhook-id, while the push is pending.
func (p *Pusher) bodyKey(id string) string { return keyspace.PushBody(p.cfg.Prefix, id) }

// bodyTTL outlives every attempt of a push: the whole schedule with its
// jitter, and two days of breaker deferrals and Retry-After waits on top.
func (p *Pusher) bodyTTL() time.Duration {
	var sum time.Duration
	for _, d := range p.cfg.Schedule {
		sum += d
	}
	return sum + sum/5 + 48*time.Hour
}

// loadBody fills pl.Body from bodyKey when the task did not carry it; ok
// is false when the body is gone (past bodyTTL), and the push cannot be
// sent byte-identical any more.
func (p *Pusher) loadBody(ctx context.Context, pl *payload) (ok bool, err error) {
	if pl.Body != "" {
		return true, nil
	}
	b, err := p.rdb.Get(ctx, p.bodyKey(pl.WebhookID)).Result()
	if errors.Is(err, redis.Nil) {
		return false, nil
	}
	if err != nil {
		return false, &infraError{err}
	}
	pl.Body = b
	return true, nil
}

// forgetBody drops a push's stored body once no attempt needs it (a dead
// letter keeps its own copy). A failure leaves it to expire.
func (p *Pusher) forgetBody(ctx context.Context, id string) {
	if err := p.rdb.Del(ctx, p.bodyKey(id)).Err(); err != nil {
		p.log.Warn("forget push body", "webhook_id", id, "err", err)
	}
}

// sentTTL is how long a delivered push is remembered, so a re-run of the
// routing within it does not send it again.
const sentTTL = 24 * time.Hour

// DeferredError defers a push until Until without consuming an attempt:
// the endpoint's circuit breaker is open (or probing), or Why.
type DeferredError struct {
	Until time.Time
	Why   string // "" : the circuit breaker
}

func (e *DeferredError) Error() string {
	why := e.Why
	if why == "" {
		why = "circuit breaker open"
	}
	return why + "; deferred until " + e.Until.UTC().Format(time.RFC3339)
}

// infraError is a failure of wakegate's own storage: retried soon,
// consuming no attempt.
type infraError struct{ err error }

func (e *infraError) Error() string { return "push storage: " + e.err.Error() }
func (e *infraError) Unwrap() error { return e.err }

// attemptError is a failed attempt: a status other than 2xx, or no answer.
type attemptError struct {
	status     int
	retryAfter time.Duration
	err        error
}

func (e *attemptError) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return "endpoint answered " + strconv.Itoa(e.status)
}

// IsFailure is Asynq's IsFailure for pushes: a deferral by the breaker,
// a storage error and a worker that died mid-attempt (Asynq's recoverer
// reports ErrLeaseExpired) consume no attempt.
func IsFailure(err error) bool {
	var d *DeferredError
	var i *infraError
	return !errors.As(err, &d) && !errors.As(err, &i) && !errors.Is(err, asynq.ErrLeaseExpired)
}

// RetryDelay is Asynq's RetryDelayFunc: for pushes, a deferral waits for
// the breaker, a Retry-After is honoured (capped at the schedule's longest
// delay), a storage error or a dead worker's attempt waits about 5 s, and
// a failed attempt n waits Schedule[n] ±20 %. An escalation timer whose
// check failed is retried soon (5 s more per retry, at most a minute):
// its retry is what schedules the recipient's next timer. Other task
// types get Asynq's default.
func (p *Pusher) RetryDelay(n int, err error, t *asynq.Task) time.Duration {
	if t.Type() == TypeEscalate {
		return jitter(min(time.Duration(n+1)*5*time.Second, time.Minute))
	}
	if t.Type() != TypeDeliver {
		return asynq.DefaultRetryDelayFunc(n, err, t)
	}
	var d *DeferredError
	var i *infraError
	var a *attemptError
	switch {
	case errors.As(err, &d):
		return max(time.Until(d.Until), 0) + randDuration(time.Second)
	case errors.As(err, &i), errors.Is(err, asynq.ErrLeaseExpired):
		return jitter(5 * time.Second)
	case errors.As(err, &a) && a.retryAfter > 0:
		return min(a.retryAfter, longest(p.cfg.Schedule))
	}
	return jitter(p.cfg.Schedule[min(max(n, 0), len(p.cfg.Schedule)-1)])
}

func longest(ds []time.Duration) time.Duration {
	var m time.Duration
	for _, d := range ds {
		m = max(m, d)
	}
	return m
}

// jitter spreads d by ±20 %.
func jitter(d time.Duration) time.Duration {
	return d - d/5 + randDuration(2*d/5)
}

func randDuration(n time.Duration) time.Duration {
	if n <= 0 {
		return 0
	}
	r, _ := rand.Int(rand.Reader, big.NewInt(int64(n)))
	return time.Duration(r.Int64())
}

// ProcessTask makes one attempt of a push; it is the Asynq handler of
// TypeDeliver.
func (p *Pusher) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var pl payload
	if err := json.Unmarshal(t.Payload(), &pl); err != nil || pl.WebhookID == "" {
		return fmt.Errorf("push payload: %w: %w", err, asynq.SkipRetry)
	}
	sent, err := p.rdb.Exists(ctx, p.sentKey(pl.WebhookID)).Result()
	if err != nil {
		return &infraError{err}
	}
	if sent == 1 { // delivered already (a re-run of the routing, or a crash after the 2xx)
		p.m.dropped.WithLabelValues("already_sent").Inc()
		return p.delivered(ctx, pl)
	}
	ep, err := p.endpoints.Get(ctx, pl.Workspace, pl.Party)
	if err != nil {
		return &infraError{err}
	}
	if ep == nil || ep.Disabled() {
		reason := "no_endpoint"
		if ep != nil {
			reason = "disabled"
		}
		p.m.dropped.WithLabelValues(reason).Inc()
		p.log.Info("push dropped", "webhook_id", pl.WebhookID, "reason", reason)
		return nil
	}
	if ok, err := p.loadBody(ctx, &pl); err != nil {
		return err
	} else if !ok {
		p.m.dropped.WithLabelValues("body_expired").Inc()
		p.log.Error("push dropped: its body expired before it could be sent", "webhook_id", pl.WebhookID)
		return fmt.Errorf("push %s: body expired: %w", pl.WebhookID, asynq.SkipRetry)
	}
	retried, _ := asynq.GetRetryCount(ctx)
	maxRetry, ok := asynq.GetMaxRetry(ctx)
	if !ok {
		maxRetry = p.maxRetry()
	}
	allowed, wait, err := p.breaker.Allow(ctx, pl.Workspace, pl.Party, p.now())
	if err != nil {
		return &infraError{err}
	}
	if !allowed && retried < maxRetry { // past MaxRetry a deferral would be archived: attempt anyway
		p.m.deferred.Inc()
		return &DeferredError{Until: wait}
	}
	release, ok := p.inflight.acquire(pl.Workspace + "\x00" + pl.Party)
	if !ok && retried < maxRetry {
		p.m.deferred.Inc()
		return &DeferredError{Until: p.now().Add(time.Second), Why: "as many attempts as allowed are in flight to this endpoint"}
	}
	if ok {
		defer release()
	}
	start := p.now()
	status, retryAfter, sendErr := p.send(ctx, ep, pl, start)
	p.m.latency.Observe(p.now().Sub(start).Seconds())
	success := sendErr == nil && status >= 200 && status < 300
	if _, err := p.breaker.Record(ctx, pl.Workspace, pl.Party, success, p.now()); err != nil {
		p.log.Warn("record push outcome in breaker", "webhook_id", pl.WebhookID, "err", err)
	}
	attempts := retried + 1
	switch {
	case success:
		p.m.attempts.WithLabelValues("success").Inc()
		if err := p.rdb.Set(ctx, p.sentKey(pl.WebhookID), "1", sentTTL).Err(); err != nil {
			p.log.Warn("remember delivered push", "webhook_id", pl.WebhookID, "err", err)
		}
		p.forgetBody(ctx, pl.WebhookID)
		return p.delivered(ctx, pl)
	case status == http.StatusGone:
		p.m.attempts.WithLabelValues("gone").Inc()
		if _, err := p.endpoints.Disable(ctx, pl.Workspace, pl.Party, ep.URL, "the endpoint answered 410 Gone"); err != nil {
			return &infraError{err}
		}
		p.log.Warn("push endpoint disabled: 410 Gone", "webhook_id", pl.WebhookID, "workspace", pl.Workspace, "party", pl.Party)
		if err := p.deadLetter(ctx, pl, ep, attempts, status, "410 Gone: endpoint disabled"); err != nil {
			return err
		}
		return fmt.Errorf("push %s: 410 Gone, endpoint disabled: %w", pl.WebhookID, asynq.SkipRetry)
	}
	p.m.attempts.WithLabelValues("failure").Inc()
	failure := &attemptError{status: status, retryAfter: retryAfter, err: sendErr}
	if retried >= len(p.cfg.Schedule) {
		if err := p.deadLetter(ctx, pl, ep, attempts, status, failure.Error()); err != nil {
			return err
		}
		return fmt.Errorf("push %s: last attempt failed: %w: %w", pl.WebhookID, failure, asynq.SkipRetry)
	}
	p.log.Debug("push attempt failed", "webhook_id", pl.WebhookID, "attempt", attempts, "status", status, "err", failure)
	return failure
}

// delivered finishes a push that got its 2xx: a human: party's entry is
// acked (a session acks itself by reading), a redelivered dead letter is
// no longer dead. Both are idempotent, so a retry after a storage error
// redoes them.
func (p *Pusher) delivered(ctx context.Context, pl payload) error {
	if strings.HasPrefix(pl.Party, "human:") {
		seqs := pl.Seqs
		if len(pl.CKs) == len(pl.Seqs) && len(pl.CKs) > 0 {
			for i, ck := range pl.CKs {
				if err := p.caughtUp(ctx, pl.Workspace, pl.Party, ck, pl.Seqs[i]); err != nil {
					return &infraError{err}
				}
			}
			seqs = nil
		}
		if pl.Seq > 0 && pl.CK != "" {
			if err := p.caughtUp(ctx, pl.Workspace, pl.Party, pl.CK, pl.Seq); err != nil {
				return &infraError{err}
			}
		} else if pl.Seq > 0 {
			seqs = append([]int64{pl.Seq}, seqs...)
		}
		if _, err := p.box.Ack(ctx, pl.Workspace, pl.Party, 0, seqs); len(seqs) > 0 && err != nil && !errors.Is(err, inbox.ErrBeyondLast) {
			return &infraError{err}
		}
	}
	if pl.Redelivery > 0 {
		if _, err := p.dead.Remove(ctx, pl.WebhookID); err != nil {
			return &infraError{err}
		}
	}
	return nil
}

// send makes one signed attempt. It returns the status (0 when no answer
// came) and the Retry-After of a 429 or 503.
func (p *Pusher) send(ctx context.Context, ep *outbound.Endpoint, pl payload, now time.Time) (int, time.Duration, error) {
	key, err := outbound.ParseSecret(ep.Secret)
	if err != nil {
		return 0, 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ep.URL, strings.NewReader(pl.Body))
	if err != nil {
		return 0, 0, fmt.Errorf("build request: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "wakegate-push/1")
	if pl.Traceparent != "" {
		req.Header.Set("Traceparent", pl.Traceparent)
		if pl.Tracestate != "" {
			req.Header.Set("Tracestate", pl.Tracestate)
		}
	}
	outbound.SetHeaders(req.Header, key, pl.WebhookID, now, []byte(pl.Body))
	resp, err := p.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // the URL may itself be a secret (a Slack webhook): keep it out of errors
		}
		return 0, 0, err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	var retryAfter time.Duration
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
		retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), now)
	}
	return resp.StatusCode, retryAfter, nil
}

// parseRetryAfter reads seconds or an HTTP date; 0 when absent or past.
func parseRetryAfter(v string, now time.Time) time.Duration {
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(min(s, int64(7*24*time.Hour/time.Second))) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// deadLetter records a push that will not be attempted again.
func (p *Pusher) deadLetter(ctx context.Context, pl payload, ep *outbound.Endpoint, attempts, status int, why string) error {
	d := outbound.DeadLetter{ID: pl.WebhookID, Workspace: pl.Workspace, Party: pl.Party, Seq: pl.Seq, Kind: pl.Kind,
		URL: ep.URL, Format: pl.Format, Attempts: attempts, Status: status, Error: why,
		DecidedAt: time.UnixMilli(pl.DecidedAt).UTC(), DeadAt: p.now().UTC(), Redeliveries: pl.Redelivery, Body: pl.Body}
	if err := p.dead.Put(ctx, d); err != nil {
		return &infraError{err}
	}
	p.m.dead.Inc()
	p.log.Warn("push dead-lettered", "webhook_id", pl.WebhookID, "workspace", pl.Workspace, "party", pl.Party,
		"attempts", attempts, "status", status)
	if p.onDeadLetter != nil {
		seqs := pl.Seqs
		if pl.Seq > 0 {
			seqs = append([]int64{pl.Seq}, seqs...)
		}
		// A storage error retries the task without consuming an attempt;
		// a last attempt that fails again dead-letters it again, so its
		// escalation is not lost (and is idempotent). After a 410 the
		// retry finds the endpoint disabled and drops the push: that one
		// escalation depends on this call.
		if err := p.onDeadLetter(ctx, pl.Workspace, pl.Party, pl.CK, seqs); err != nil {
			return &infraError{err}
		}
	}
	p.forgetBody(ctx, pl.WebhookID) // last: a retry after a storage error above still has it
	return nil
}

// DeadLetters returns up to limit dead letters, newest first, and how
// many there are.
func (p *Pusher) DeadLetters(ctx context.Context, limit int) ([]outbound.DeadLetter, int64, error) {
	return p.dead.List(ctx, limit)
}

// Redeliver enqueues a dead letter again — same webhook-id, same body, a
// fresh schedule — to its party's current endpoint. It returns
// outbound.ErrNotFound for an unknown id and outbound.ErrEndpointUnavailable. The
// dead letter stays until the redelivery gets its 2xx.
func (p *Pusher) Redeliver(ctx context.Context, id string) (outbound.DeadLetter, error) {
	d, err := p.dead.Get(ctx, id)
	if err != nil {
		return outbound.DeadLetter{}, err
	}
	ep, err := p.endpoints.Get(ctx, d.Workspace, d.Party)
	if err != nil {
		return outbound.DeadLetter{}, err
	}
	if ep == nil || ep.Disabled() {
		return outbound.DeadLetter{}, outbound.ErrEndpointUnavailable
	}
	d.Redeliveries++
	pl := payload{Workspace: d.Workspace, Party: d.Party, Seq: d.Seq, WebhookID: d.ID, Kind: d.Kind, Format: d.Format,
		Body: d.Body, DecidedAt: d.DecidedAt.UnixMilli(), Redelivery: d.Redeliveries}
	// Count first: a redelivery that succeeds at once removes the record,
	// which a later write would bring back.
	if err := p.dead.Put(ctx, d); err != nil {
		return outbound.DeadLetter{}, err
	}
	if err := p.enqueue(ctx, fmt.Sprintf("%s-r%d", d.ID, d.Redeliveries), pl); err != nil {
		return outbound.DeadLetter{}, err
	}
	return d, nil
}
