package tasks

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/event"
)

const ws = "acme"

// env is a pusher and an Asynq server working its queue, on a fresh
// prefix, with loopback endpoints allowed (WAKEGATE_ALLOW_PRIVATE_ENDPOINTS).
type env struct {
	t         *testing.T
	ctx       context.Context
	rdb       redis.UniversalClient
	prefix    string
	box       *inbox.Inbox
	endpoints *outbound.Endpoints
	p         *Pusher
	insp      *asynq.Inspector
	reg       *prometheus.Registry
	n         atomic.Int64
}

type envOpts struct {
	cfg         Config
	concurrency int
	rdb         redis.UniversalClient // default: the test Redis
	prefix      string
	// mux registers more handlers on the env's Asynq server (holds tests).
	mux func(e *env, mux *asynq.ServeMux)
}

func newEnv(t *testing.T, o envOpts) *env {
	t.Helper()
	rdb, prefix := o.rdb, o.prefix
	if rdb == nil {
		rdb, prefix = redistest.New(t)
	}
	if o.concurrency == 0 {
		o.concurrency = 10
	}
	cfg := o.cfg
	cfg.Prefix = prefix
	if cfg.Guard == nil {
		cfg.Guard = &outbound.Guard{AllowPrivate: true}
	}
	if cfg.Schedule == nil {
		cfg.Schedule = []time.Duration{time.Second, time.Second}
	}
	e := &env{t: t, ctx: context.Background(), rdb: rdb, prefix: prefix, reg: prometheus.NewRegistry(),
		box: inbox.New(rdb, inbox.Config{Prefix: prefix}), endpoints: outbound.NewEndpoints(rdb, prefix, cfg.Guard)}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	e.p = New(rdb, asynq.NewClientFromRedisClient(rdb), e.box, e.endpoints, log, e.reg, cfg)
	e.insp = asynq.NewInspectorFromRedisClient(rdb)
	mux := asynq.NewServeMux()
	mux.Handle(TypeDeliver, e.p)
	if o.mux != nil {
		o.mux(e, mux)
	}
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency: o.concurrency, Queues: queueMap(e.p.Queues()),
		DelayedTaskCheckInterval: 100 * time.Millisecond, TaskCheckInterval: 50 * time.Millisecond,
		RetryDelayFunc: e.p.RetryDelay, IsFailure: IsFailure, ShutdownTimeout: 3 * time.Second,
		LogLevel: asynq.FatalLevel,
	})
	if err := srv.Start(mux); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Shutdown()
		dropQueues(rdb, e.p.Queues())
	})
	return e
}

// queueMap gives every queue priority 1, as NewServer does.
func queueMap(queues []string) map[string]int {
	m := map[string]int{}
	for _, q := range queues {
		m[q] = 1
	}
	return m
}

// dropQueues deletes the queues, their tasks and the stats DeleteQueue
// leaves.
func dropQueues(rdb redis.UniversalClient, queues []string) {
	insp := asynq.NewInspectorFromRedisClient(rdb)
	for _, q := range queues {
		_ = insp.DeleteQueue(q, true)
		redistest.Flush(rdb, "asynq:{"+q+"}")
	}
}

// endpoint puts party's endpoint and returns its secret.
func (e *env) endpoint(party, url, format string) string {
	e.t.Helper()
	ep, _, _, err := e.endpoints.Put(e.ctx, ws, party, outbound.Put{URL: url, Format: format})
	if err != nil {
		e.t.Fatal(err)
	}
	return ep.Secret
}

// wake delivers a new attention event to party's inbox and enqueues its
// push, as the router does.
func (e *env) wake(party string) (inbox.Result, *event.Event) {
	e.t.Helper()
	n := e.n.Add(1)
	ev := &event.Event{SpecVersion: event.SpecVersion, ID: fmt.Sprint(n), Source: event.AgentSource(ws, "session:w"),
		Type: "session.awaiting_input", Subject: fmt.Sprintf("session:w%d", n), Time: time.Now().UTC(), Workspace: ws,
		SessionID: fmt.Sprintf("w%d", n), Priority: event.Attention, Summary: fmt.Sprintf("w%d waits for input", n)}
	res, err := e.box.Deliver(e.ctx, inbox.Delivery{Workspace: ws, Party: party, Event: ev, Via: inbox.ViaController}, time.Now())
	if err != nil || !res.Wake {
		e.t.Fatalf("deliver: %+v %v", res, err)
	}
	if err := e.p.Enqueue(e.ctx, ws, party, res, ev); err != nil {
		e.t.Fatal(err)
	}
	return res, ev
}

// idle reports whether the push queue holds no task to work.
func (e *env) idle() bool {
	for _, q := range e.p.Queues() {
		qi, err := e.insp.GetQueueInfo(q)
		if err != nil { // no queue yet: nothing enqueued
			continue
		}
		if qi.Pending+qi.Active+qi.Scheduled+qi.Retry != 0 {
			return false
		}
	}
	return true
}

// eventually polls cond until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %s", within, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// received is one request a receiver got.
type received struct {
	path   string
	header http.Header
	body   []byte
	at     time.Time
	done   time.Time // when the answer was written
	status int
}

// receiver is a push endpoint on loopback that answers as told.
type receiver struct {
	mu      sync.Mutex
	reqs    []*received
	answer  func(n int, r *http.Request, w http.ResponseWriter) int // n counts from 1; returns the status written
	srv     *httptest.Server
	release chan struct{} // closed when the test ends: hanging answers return
}

func newReceiver(t *testing.T, answer func(n int, r *http.Request, w http.ResponseWriter) int) *receiver {
	rc := &receiver{answer: answer, release: make(chan struct{})}
	rc.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got := &received{path: r.URL.Path, header: r.Header.Clone(), body: body, at: time.Now()}
		rc.mu.Lock()
		rc.reqs = append(rc.reqs, got)
		n := len(rc.reqs)
		rc.mu.Unlock()
		status := rc.answer(n, r, w)
		rc.mu.Lock()
		got.status, got.done = status, time.Now()
		rc.mu.Unlock()
	}))
	t.Cleanup(rc.srv.Close)
	t.Cleanup(func() { close(rc.release) }) // runs first: hanging handlers return before Close waits for them
	return rc
}

// statuses answers the nth request with codes[n-1], the last repeating.
func statuses(codes ...int) func(int, *http.Request, http.ResponseWriter) int {
	return func(n int, _ *http.Request, w http.ResponseWriter) int {
		c := codes[min(n, len(codes))-1]
		w.WriteHeader(c)
		return c
	}
}

func (rc *receiver) url() string { return rc.srv.URL + "/hook" }

func (rc *receiver) got() []received {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	out := make([]received, len(rc.reqs))
	for i, r := range rc.reqs {
		out[i] = *r
	}
	return out
}

func (rc *receiver) count() int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return len(rc.reqs)
}
