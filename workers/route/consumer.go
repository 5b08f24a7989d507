// Package route consumes the journal and routes each event to the parties
// that must hear it. This file is the consumption: each journal shard is
// read by exactly one worker at a time, under a Redis lease with a fencing
// epoch, kept by a heartbeat; a worker that dies loses its leases when they
// expire (TTL 3 s, renewed every second) and another takes its shards
// over; one restarted under the same identity (identity.go) reclaims them
// at once. A worker that stops hands over: it releases its leases and
// leaves the worker set, so a peer takes its shards within a second. More
// workers own more shards: each takes at most its fair share of the
// shards while other workers live.
package route

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/blockread"
)

// ErrPermanent marks a handler error that will not go away by retrying
// (a bug, bad data): it counts toward setting the event aside as poison.
// Any other handler error is an infrastructure error: retried with capped
// backoff, consuming no attempt.
var ErrPermanent = errors.New("permanent")

// Handler handles one journaled event. It must be idempotent: after a
// crash or a takeover an event may be handled again.
type Handler func(ctx context.Context, shard int, e *event.Event) error

// ConsumerConfig tunes consumption. Zero values take the defaults.
type ConsumerConfig struct {
	LeaseTTL    time.Duration // default 3s; renewed every third of it
	WorkerID    string        // the identity's base name; default the host name (identity.go)
	MaxAttempts int           // permanent failures before poison; default 5
	Batch       int64         // entries read at once; default 100
	Parallel    int           // subjects of a batch routed at once; default 32
}

// Consumer owns journal shards and feeds their events to a handler.
type Consumer struct {
	rdb     redis.UniversalClient
	j       *journal.Journal
	handle  Handler
	log     *slog.Logger
	cfg     ConsumerConfig
	id      *identity
	owner   string // the identity held, set by Run
	m       *consumerMetrics
	mu      sync.Mutex
	running map[int]context.CancelFunc // shards this consumer works
	done    sync.WaitGroup
	beat    atomic.Int64 // unix ms of the last heartbeat written
}

// NewConsumer returns a consumer; owner names this worker process.
func NewConsumer(rdb redis.UniversalClient, j *journal.Journal, h Handler, log *slog.Logger, reg prometheus.Registerer, cfg ConsumerConfig) *Consumer {
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = 3 * time.Second
	}
	if cfg.MaxAttempts <= 0 {
		cfg.MaxAttempts = 5
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 32
	}
	return &Consumer{rdb: rdb, j: j, handle: h, log: log.With("component", "route"), cfg: cfg,
		id: newIdentity(cfg.WorkerID), m: newConsumerMetrics(reg), running: map[int]context.CancelFunc{}}
}

type consumerMetrics struct {
	held    prometheus.Gauge
	handled *prometheus.CounterVec
	lag     prometheus.Gauge
}

func newConsumerMetrics(reg prometheus.Registerer) *consumerMetrics {
	f := promauto.With(reg)
	m := &consumerMetrics{
		held: f.NewGauge(prometheus.GaugeOpts{Name: "wakegate_route_shards_held", Help: "Journal shards this worker holds."}),
		handled: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_route_events_total",
			Help: "Journal events handled, by outcome."}, []string{"outcome"}),
		lag: f.NewGauge(prometheus.GaugeOpts{Name: "wakegate_route_lag_seconds",
			Help: "Age of the last event routed when it was routed."}),
	}
	for _, o := range []string{"routed", "retry", "failed", "poison"} {
		m.handled.WithLabelValues(o)
	}
	return m
}

func (c *Consumer) leaseKey(shard int) string  { return c.j.Keys(shard).Lease() }
func (c *Consumer) epochKey(shard int) string  { return c.j.Keys(shard).Epoch() }
func (c *Consumer) cursorKey(shard int) string { return cursorKey(c.j, shard) }

// cursorKey is where a shard's routing cursor is kept: the id of the last
// journal entry routed.
func cursorKey(j *journal.Journal, shard int) string { return j.Keys(shard).Cursor() }
func (c *Consumer) workersKey() string               { return keyspace.RouteWorkers(c.j.Config().Prefix) }

// acquireScript takes a free lease, or one held under the claimant's own
// identity (a dead predecessor's: an identity is held by one live process
// at a time, identity.go), with a new epoch that fences the old holder.
// Its KEYS, ARGV and reply are in acquire.lua.
//
//go:embed acquire.lua
var acquireLua string

var acquireScript = keyspace.NewScript("workers/route/acquire.lua", acquireLua)

// renewScript extends a lease its holder still holds.
// Its KEYS, ARGV and reply are in renew.lua.
//
//go:embed renew.lua
var renewLua string

var renewScript = keyspace.NewScript("workers/route/renew.lua", renewLua)

// advanceScript moves a shard's cursor, fenced by the lease (a worker that
// lost its lease, paused past the TTL, cannot move the new holder's
// cursor), after appending the batch's delivery ledger entries. The next
// batch is read by an XRANGE pipelined after it (Consumer.advance), so a
// shard with a backlog costs no round trip of its own to read; not inside
// the script, where Redis would convert every entry into Lua values and
// back (about 4 µs of Redis per entry, more than routing it costs there).
// Its KEYS, ARGV and reply are in advance.lua.
//
//go:embed advance.lua
var advanceLua string

var advanceScript = keyspace.NewScript("workers/route/advance.lua", advanceLua)

// Run claims a worker identity, then takes and works shards until ctx is
// cancelled; then it hands over: releases its leases and leaves the worker
// set, so that peers take its shards at their next heartbeat.
func (c *Consumer) Run(ctx context.Context) error {
	if err := c.claimRetrying(ctx); err != nil {
		return nil // stopped before Redis answered
	}
	tick := time.NewTicker(c.cfg.LeaseTTL / 6)
	defer tick.Stop()
	for {
		c.balance(ctx)
		select {
		case <-ctx.Done():
			c.stopAll()
			c.leave()
			return nil
		case <-tick.C:
		}
	}
}

// claimRetrying claims an identity, retrying with capped backoff while
// Redis does not answer; it fails only when ctx ends.
func (c *Consumer) claimRetrying(ctx context.Context) error {
	backoff := 50 * time.Millisecond
	for {
		name, err := c.claim(ctx)
		if err == nil {
			c.owner = name
			c.log.Info("worker identity claimed", "worker_id", name)
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		c.log.Warn("claim worker identity; will retry", "err", err)
		sleep(ctx, backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
}

// leave removes this worker from the worker set and frees its identity,
// after its shards were released: the survivors' share grows at their
// next heartbeat.
func (c *Consumer) leave() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	pipe := c.rdb.Pipeline()
	pipe.ZRem(ctx, c.workersKey(), c.owner)
	pipe.EvalSha(ctx, renewScript.Hash(), []string{c.recordKey(c.owner)}, c.id.value, 0, "1")
	if _, err := pipe.Exec(ctx); err != nil {
		_ = c.rdb.ZRem(ctx, c.workersKey(), c.owner).Err()
		_ = renewScript.Run(ctx, c.rdb, []string{c.recordKey(c.owner)}, c.id.value, 0, "1").Err()
	}
	c.log.Info("left the worker set; shards handed over", "worker_id", c.owner)
}

// Healthy reports whether this consumer's heartbeat reached Redis within
// its lease TTL (a worker's /readyz).
func (c *Consumer) Healthy() error {
	if last := c.beat.Load(); time.Since(time.UnixMilli(last)) > c.cfg.LeaseTTL {
		return fmt.Errorf("route consumer: no heartbeat for more than %v", c.cfg.LeaseTTL)
	}
	return nil
}

// balance heartbeats this worker and takes free shards up to its share.
func (c *Consumer) balance(ctx context.Context) {
	now := time.Now()
	mine, err := renewScript.Run(ctx, c.rdb, []string{c.recordKey(c.owner)}, c.id.value, identityTTL.Milliseconds(), "0").Int()
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("route heartbeat", "err", err)
		}
		return
	}
	if mine != 1 {
		// Silent for a whole lease TTL (paused, cut off): another process
		// took this identity, and with it the leases under it.
		c.log.Warn("worker identity lost; claiming another", "worker_id", c.owner)
		c.stopAll()
		_ = c.rdb.ZRem(ctx, c.workersKey(), c.owner).Err()
		if c.claimRetrying(ctx) != nil {
			return
		}
	}
	live, err := c.liveWorkers(ctx, now)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("route heartbeat", "err", err)
		}
		return
	}
	c.beat.Store(now.UnixMilli())
	shards := c.j.Config().Shards
	share := (shards + live - 1) / live
	c.mu.Lock()
	held := len(c.running)
	c.mu.Unlock()
	if held > share { // a new worker came: give back what is over our share
		c.giveBack(held - share)
	}
	var taken []int
	for s := 0; s < shards && held < share; s++ {
		c.mu.Lock()
		_, mine := c.running[s]
		c.mu.Unlock()
		if mine {
			continue
		}
		epoch, err := acquireScript.Run(ctx, c.rdb, []string{c.leaseKey(s), c.epochKey(s)}, c.owner, c.cfg.LeaseTTL.Milliseconds()).Int64()
		if err != nil || epoch == 0 {
			continue
		}
		held++
		c.start(ctx, s, c.owner+":"+strconv.FormatInt(epoch, 10))
		taken = append(taken, s)
	}
	// One line at info per round that took shards (a start takes them all
	// at once); each shard's lease is at debug.
	if len(taken) > 0 {
		c.log.Info("shards taken", "count", len(taken), "shards", taken, "held", held, "of", shards, "live_workers", live)
	}
}

func (c *Consumer) liveWorkers(ctx context.Context, now time.Time) (int, error) {
	pipe := c.rdb.TxPipeline()
	pipe.ZAdd(ctx, c.workersKey(), redis.Z{Score: float64(now.UnixMilli()), Member: c.owner})
	// A live worker beats every quarter TTL: one silent for a whole TTL is
	// gone, and so are its leases, so the survivors' share grows as soon
	// as its shards are free.
	pipe.ZRemRangeByScore(ctx, c.workersKey(), "-inf", strconv.FormatInt(now.Add(-c.cfg.LeaseTTL).UnixMilli(), 10))
	n := pipe.ZCard(ctx, c.workersKey())
	if _, err := pipe.Exec(ctx); err != nil {
		return 0, err
	}
	return max(int(n.Val()), 1), nil
}

func (c *Consumer) start(ctx context.Context, shard int, lease string) {
	sctx, cancel := context.WithCancel(ctx)
	c.mu.Lock()
	c.running[shard] = cancel
	c.m.held.Set(float64(len(c.running)))
	c.mu.Unlock()
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		c.work(sctx, shard, lease)
		c.mu.Lock()
		delete(c.running, shard)
		c.m.held.Set(float64(len(c.running)))
		c.mu.Unlock()
		// Release so a successor need not wait for the TTL.
		rctx, cancel := context.WithTimeout(context.Background(), time.Second)
		_ = renewScript.Run(rctx, c.rdb, []string{c.leaseKey(shard)}, lease, 0, "1").Err()
		cancel()
	}()
	c.log.Debug("shard taken", "shard", shard, "lease", lease)
}

func (c *Consumer) giveBack(n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for s, cancel := range c.running {
		if n == 0 {
			return
		}
		cancel()
		n--
		c.log.Info("shard given back", "shard", s)
	}
}

func (c *Consumer) stopAll() {
	c.mu.Lock()
	for _, cancel := range c.running {
		cancel()
	}
	c.mu.Unlock()
	c.done.Wait()
}

// work reads one shard from its cursor, in order, while the lease holds.
func (c *Consumer) work(ctx context.Context, shard int, lease string) {
	ctx, lost := context.WithCancel(ctx)
	defer lost()
	go c.keepLease(ctx, shard, lease, lost)
	cursor, err := c.rdb.Get(ctx, c.cursorKey(shard)).Result()
	if errors.Is(err, redis.Nil) {
		cursor = "0-0"
	} else if err != nil {
		return
	}
	backoff := 50 * time.Millisecond
	var msgs []redis.XMessage // the next batch, when the last advance read it
	for ctx.Err() == nil {
		if len(msgs) == 0 {
			res, err := blockread.Do(ctx, func() ([]redis.XStream, error) {
				return c.rdb.XRead(ctx, &redis.XReadArgs{Streams: []string{c.j.StreamKey(shard), cursor},
					Count: c.cfg.Batch, Block: c.cfg.LeaseTTL / 5}).Result()
			})
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				if ctx.Err() == nil {
					c.log.Warn("read journal shard", "shard", shard, "err", err)
					sleep(ctx, backoff)
					backoff = min(2*backoff, 5*time.Second)
				}
				continue
			}
			backoff = 50 * time.Millisecond
			msgs = res[0].Messages
		}
		ledger, ok := c.processBatch(ctx, shard, msgs)
		if !ok {
			return
		}
		done := msgs[len(msgs)-1].ID
		// One fenced cursor move per batch, in one round trip with the
		// batch's ledger entries and the read of the next batch: a crash
		// before it re-routes the batch, which changes nothing (routing is
		// idempotent; the ledger is read as a set).
		next, ok, err := c.advance(ctx, shard, lease, done, ledger)
		if err != nil {
			return // whoever resumes routes the batch again
		}
		if !ok {
			c.log.Warn("shard lease lost while routing", "shard", shard, "lease", lease)
			return
		}
		cursor, msgs = done, next
	}
}

// advance appends a batch's ledger entries and moves the shard's cursor
// past the batch, fenced by the lease, in one script call, and reads the
// next batch in the same round trip (empty when the shard has nothing more
// yet); it reports whether the lease was still this holder's.
func (c *Consumer) advance(ctx context.Context, shard int, lease, done string, ledger [][]any) ([]redis.XMessage, bool, error) {
	if n := len(ledger) - maxLedgerArgs; n > 0 {
		// A large batch (a fan-out): the entries beyond what one script
		// call takes are appended first, pipelined; a crash before the
		// move re-routes the batch and they are recorded again (read as a
		// set), as before the move was fenced.
		p := c.rdb.Pipeline()
		for _, values := range ledger[:n] {
			p.XAdd(ctx, &redis.XAddArgs{Stream: LedgerKey(c.j, shard), MaxLen: LedgerLen, Approx: true, Values: values})
		}
		if _, err := p.Exec(ctx); err != nil {
			return nil, false, err
		}
		ledger = ledger[n:]
	}
	args := make([]any, 0, 3+12*len(ledger))
	args = append(args, lease, done, LedgerLen)
	for _, values := range ledger {
		args = append(args, values...)
	}
	// The script and the read of the next batch in one round trip: the
	// read runs right after the script, on the state it left; its entries
	// are used only when the script moved the cursor.
	pipe := c.rdb.Pipeline()
	moved := advanceScript.Run(ctx, pipe, []string{c.leaseKey(shard), c.cursorKey(shard), LedgerKey(c.j, shard)}, args...)
	next := pipe.XRangeN(ctx, c.j.StreamKey(shard), "("+done, "+", int64(c.cfg.Batch))
	if _, err := pipe.Exec(ctx); err != nil && !redis.HasErrorPrefix(err, "NOSCRIPT") {
		return nil, false, err
	}
	if redis.HasErrorPrefix(moved.Err(), "NOSCRIPT") {
		// Script.Run loads a missing script only outside a pipeline:
		// move the cursor on its own, then read.
		held, err := advanceScript.Run(ctx, c.rdb, []string{c.leaseKey(shard), c.cursorKey(shard), LedgerKey(c.j, shard)}, args...).Int()
		if err != nil || held != 1 {
			return nil, false, err
		}
		msgs, err := c.rdb.XRangeN(ctx, c.j.StreamKey(shard), "("+done, "+", int64(c.cfg.Batch)).Result()
		if err != nil {
			return nil, false, fmt.Errorf("advance shard %d: read the next batch: %w", shard, err)
		}
		return msgs, true, nil
	}
	held, err := moved.Int()
	if err != nil {
		return nil, false, err
	}
	if held != 1 {
		return nil, false, nil
	}
	msgs, err := next.Result()
	if err != nil {
		return nil, false, fmt.Errorf("advance shard %d: read the next batch: %w", shard, err)
	}
	return msgs, true, nil
}

// maxLedgerArgs bounds the ledger entries one advance script call appends.
const maxLedgerArgs = 1000

// keepLease renews the lease every third of its TTL, also while an event
// is being retried, and calls lost once it is no longer ours (or cannot be
// confirmed for a whole TTL).
func (c *Consumer) keepLease(ctx context.Context, shard int, lease string, lost context.CancelFunc) {
	t := time.NewTicker(c.cfg.LeaseTTL / 3)
	defer t.Stop()
	renewed := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		ok, err := renewScript.Run(ctx, c.rdb, []string{c.leaseKey(shard)}, lease, c.cfg.LeaseTTL.Milliseconds(), "0").Int()
		switch {
		case err == nil && ok == 1:
			renewed = time.Now()
		case err == nil:
			c.log.Warn("shard lease lost", "shard", shard, "lease", lease)
			lost()
			return
		case time.Since(renewed) > c.cfg.LeaseTTL:
			lost() // cannot tell whether we still hold it: stop
			return
		}
	}
}

// processBatch routes a batch of one shard: events of one subject in
// order, different subjects concurrently (Parallel at once), so one slow
// subject does not hold the others up. It reports false when ctx ended
// before every event was routed or set aside; else it returns the ledger
// entries the batch's deliveries left to write (batch.record).
func (c *Consumer) processBatch(ctx context.Context, shard int, msgs []redis.XMessage) ([][]any, bool) {
	var order []string
	bySubject := map[string][]*event.Event{}
	for _, m := range msgs {
		e, err := journal.Decode(shard, m)
		if err != nil {
			c.poison(ctx, shard, m.ID, err.Error())
			continue
		}
		if _, ok := bySubject[e.Subject]; !ok {
			order = append(order, e.Subject)
		}
		bySubject[e.Subject] = append(bySubject[e.Subject], e)
	}
	all := make([]*event.Event, 0, len(msgs))
	for _, subject := range order {
		all = append(all, bySubject[subject]...)
	}
	ctx = withBatch(ctx, all) // what the router reads once per batch: batch.go
	b := batchFrom(ctx)
	// Parallel goroutines take the subjects in turn: a goroutine per
	// subject grew a fresh stack for the router each time (stack copying
	// was a few per cent of a worker's CPU).
	var wg sync.WaitGroup
	var next atomic.Int64
	for range min(len(order), c.cfg.Parallel) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < len(order); i = int(next.Add(1)) - 1 {
				for _, e := range bySubject[order[i]] {
					if !c.process(ctx, shard, e) {
						break // ctx ended: the rest of this subject waits for whoever resumes
					}
				}
			}
		}()
	}
	wg.Wait()
	return b.ledger, ctx.Err() == nil
}

// process handles one event until it succeeds, is set aside, or ctx ends;
// it reports whether to go on.
func (c *Consumer) process(ctx context.Context, shard int, e *event.Event) bool {
	_, id, _ := journal.ParseSeq(e.Seq)
	attempts := 0
	backoff := 50 * time.Millisecond
	for ctx.Err() == nil {
		err := c.safeHandle(ctx, shard, e)
		if err == nil {
			c.m.handled.WithLabelValues("routed").Inc()
			c.m.lag.Set(time.Since(streamTime(id)).Seconds())
			return true
		}
		if errors.Is(err, ErrPermanent) {
			attempts++
			c.m.handled.WithLabelValues("failed").Inc()
			if attempts >= c.cfg.MaxAttempts {
				c.poison(ctx, shard, id, err.Error())
				return true
			}
		} else {
			c.m.handled.WithLabelValues("retry").Inc()
		}
		if ctx.Err() == nil {
			c.log.Warn("route event failed", "shard", shard, "event_id", e.ID, "attempt", attempts, "err", err)
		}
		sleep(ctx, backoff)
		backoff = min(2*backoff, 5*time.Second)
	}
	return false
}

func (c *Consumer) safeHandle(ctx context.Context, shard int, e *event.Event) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic routing %s: %v: %w", e.ID, v, ErrPermanent)
		}
	}()
	return c.handle(ctx, shard, e)
}

// poison sets an event aside with its reason; routing goes on.
func (c *Consumer) poison(ctx context.Context, shard int, id, reason string) {
	c.m.handled.WithLabelValues("poison").Inc()
	c.log.Error("journal event set aside as poison", "shard", shard, "seq", journal.FormatSeq(shard, id), "reason", reason)
	_ = c.rdb.XAdd(ctx, &redis.XAddArgs{Stream: c.j.Keys(shard).RoutePoison(), MaxLen: 10000, Approx: true,
		Values: []any{"seq", journal.FormatSeq(shard, id), "reason", reason, "at", time.Now().UnixMilli()}}).Err()
}

// Poisoned lists the events of a shard set aside, newest last.
func (c *Consumer) Poisoned(ctx context.Context, shard int) ([]redis.XMessage, error) {
	return c.rdb.XRange(ctx, c.j.Keys(shard).RoutePoison(), "-", "+").Result()
}

// Held lists the shards this consumer works now.
func (c *Consumer) Held() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []int
	for s := range c.running {
		out = append(out, s)
	}
	return out
}

func streamTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n)
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
