// Package derive turns committed GitHub deliveries into journal events:
// it consumes the ingest streams, normalizes each delivery and folds it
// into the PR tracker, whose script journals what it derives. Everything
// it does is idempotent on fact ids, so the relay can re-run any record
// whose processing did not finish (a crash, Redis away): at start and
// every 5 s it claims records left pending by any consumer.
package derive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/workers/blockread"
)

const group = "derive"

// batchSize is how many records one read takes: a backlog is derived in
// batches this large, each with four round trips (read, raw deliveries,
// tracker, ack) whatever its size.
const batchSize = 128

// linger is how long a consumer whose last read took fewer than
// lingerBelow records waits before reading again. A read returns as soon
// as one record is there, so at a moderate rate every record would pay
// its own read, tracker call and ack: round trips that cost an idle Redis
// more than folding the record in (docs/performance.md). Waiting a little
// lets the next read take several.
const (
	linger      = 2 * time.Millisecond
	lingerBelow = 8
)

// Config of the deriver.
type Config struct {
	RelayEvery time.Duration // default 5s
	MinIdle    time.Duration // a pending record this idle is re-run; default 15s
	MaxRuns    int64         // deliveries of one record before it is set aside as poison; default 10
	Now        func() time.Time
}

// Deriver consumes the ingest streams.
type Deriver struct {
	rdb      redis.UniversalClient
	store    *ingest.Store
	tracker  *tracker.Tracker
	log      *slog.Logger
	cfg      Config
	consumer string
	m        *metrics
	beats    []atomic.Int64 // per shard: when its consumer last came round (unix ms)
}

// New returns a deriver folding deliveries into tr.
func New(rdb redis.UniversalClient, store *ingest.Store, tr *tracker.Tracker, log *slog.Logger, reg prometheus.Registerer, cfg Config) *Deriver {
	if cfg.RelayEvery <= 0 {
		cfg.RelayEvery = 5 * time.Second
	}
	if cfg.MinIdle <= 0 {
		cfg.MinIdle = 15 * time.Second
	}
	if cfg.MaxRuns <= 0 {
		cfg.MaxRuns = 10
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return &Deriver{rdb: rdb, store: store, tracker: tr, log: log.With("component", "derive"), cfg: cfg,
		consumer: "derive-" + hex.EncodeToString(b[:]), m: newMetrics(reg), beats: make([]atomic.Int64, store.Shards())}
}

type metrics struct {
	derived  *prometheus.CounterVec
	relayed  prometheus.Counter
	lag      prometheus.Gauge
	duration prometheus.Histogram
}

func newMetrics(reg prometheus.Registerer) *metrics {
	f := promauto.With(reg)
	m := &metrics{
		derived: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_derive_records_total",
			Help: "Committed deliveries derived, by outcome."}, []string{"outcome"}),
		relayed: f.NewCounter(prometheus.CounterOpts{Name: "wakegate_derive_relayed_total",
			Help: "Records re-run by the relay after a consumer did not finish them."}),
		lag: f.NewGauge(prometheus.GaugeOpts{Name: "wakegate_derive_lag_seconds",
			Help: "Age of the newest record derived when it was derived."}),
		duration: f.NewHistogram(prometheus.HistogramOpts{Name: "wakegate_derive_duration_seconds",
			Help: "Time to derive one record.", Buckets: prometheus.ExponentialBuckets(0.0002, 2, 14)}),
	}
	for _, o := range []string{"journaled", "ignored", "expired", "poison", "retry"} {
		m.derived.WithLabelValues(o)
	}
	return m
}

// Run consumes every ingest shard until ctx is cancelled. A batch read
// before the stop is finished (within finishBound), and what this
// consumer still has pending is derived before Run returns, so that no
// record waits for a peer's relay (docs/design.md §9).
func (d *Deriver) Run(ctx context.Context) error {
	backoff := newBackoff()
	for s := 0; s < d.store.Shards() && ctx.Err() == nil; {
		err := d.ensureGroup(ctx, s)
		if err == nil {
			s++
			continue
		}
		if ctx.Err() == nil {
			// Redis is away (a start before it is up): wait for it.
			d.log.Warn("create consumer group; will retry", "err", err)
			backoff.wait(ctx)
		}
	}
	select {
	case <-ctx.Done():
		return nil // stopped before the groups were there: nothing was read
	default:
	}
	var wg sync.WaitGroup
	for s := range d.store.Shards() {
		wg.Add(1)
		go func() { defer wg.Done(); d.consume(ctx, s) }()
	}
	wg.Add(1)
	go func() { defer wg.Done(); d.relayLoop(ctx) }()
	wg.Wait()
	d.finishPending()
	return nil
}

// finishBound bounds how long a stopping deriver spends finishing the
// batches it read.
const finishBound = 5 * time.Second

// finishContext is the context a batch read before a stop is finished with:
// not cancelled by the stop, bounded by finishBound from it.
func finishContext(ctx context.Context) (context.Context, context.CancelFunc) {
	fctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	stop := context.AfterFunc(ctx, func() {
		t := time.AfterFunc(finishBound, cancel)
		context.AfterFunc(fctx, func() { t.Stop() })
	})
	return fctx, func() { stop(); cancel() }
}

// finishPending derives, at stop, the records this consumer read but did
// not finish (a read that answered as the stop came): its own pending
// entries, which a peer's relay would only take once idle for MinIdle.
func (d *Deriver) finishPending() {
	ctx, cancel := context.WithTimeout(context.Background(), finishBound)
	defer cancel()
	for s := range d.store.Shards() {
		res, err := d.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
			Group: group, Consumer: d.consumer, Streams: []string{d.store.StreamKey(s), "0"}, Count: batchSize,
		}).Result()
		if err != nil {
			if !errors.Is(err, redis.Nil) && ctx.Err() == nil {
				d.log.Warn("read pending records at stop; the relay takes them", "shard", s, "err", err)
			}
			continue
		}
		for _, st := range res {
			if len(st.Messages) > 0 {
				d.handle(ctx, s, st.Messages)
			}
		}
	}
}

func (d *Deriver) ensureGroup(ctx context.Context, shard int) error {
	err := d.rdb.XGroupCreateMkStream(ctx, d.store.StreamKey(shard), group, "0").Err()
	if err != nil && !redis.HasErrorPrefix(err, "BUSYGROUP") {
		return fmt.Errorf("create consumer group on ingest shard %d: %w", shard, err)
	}
	return nil
}

// consume derives one shard's records as they come, in two stages: while
// a batch is folded into the tracker and acknowledged (Redis), the next
// one is read and normalized (CPU). Batches finish in the order read.
func (d *Deriver) consume(ctx context.Context, shard int) {
	backoff := newBackoff()
	stream := d.store.StreamKey(shard)
	var finishing chan struct{} // closed when the previous batch has finished
	defer func() {
		if finishing != nil {
			<-finishing
		}
	}()
	for ctx.Err() == nil {
		d.beats[shard].Store(time.Now().UnixMilli())
		res, err := blockread.Do(ctx, func() ([]redis.XStream, error) {
			return d.rdb.XReadGroup(ctx, &redis.XReadGroupArgs{
				Group: group, Consumer: d.consumer, Streams: []string{stream, ">"}, Count: batchSize, Block: 2 * time.Second,
			}).Result()
		})
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			if redis.HasErrorPrefix(err, "NOGROUP") {
				_ = d.ensureGroup(ctx, shard)
			}
			d.log.Warn("read ingest shard", "shard", shard, "err", err)
			backoff.wait(ctx)
			continue
		}
		backoff.reset()
		n := 0
		// What was read is finished even when the stop comes meanwhile.
		fctx, release := finishContext(ctx)
		for _, st := range res {
			n += len(st.Messages)
			b := d.prepare(fctx, shard, st.Messages)
			if finishing != nil {
				<-finishing
				finishing = nil
			}
			if b == nil {
				continue
			}
			done := make(chan struct{})
			finishing = done
			go func() {
				defer close(done)
				d.finish(fctx, b)
			}()
		}
		last := finishing
		go func() {
			if last != nil {
				<-last
			}
			release()
		}()
		if n < lingerBelow {
			wait(ctx, linger)
		}
	}
}

// Healthy reports whether every shard's consumer came round recently: a
// consumer blocks at most 2 s per read, so 15 s of silence means it is
// stuck (or Run has not started).
func (d *Deriver) Healthy() error {
	cutoff := time.Now().Add(-15 * time.Second).UnixMilli()
	for s := range d.beats {
		if d.beats[s].Load() < cutoff {
			return fmt.Errorf("derive consumer of ingest shard %d is not running", s)
		}
	}
	return nil
}

// handle derives a batch of one shard's records: their raw deliveries in
// one round trip, normalized in parallel (the CPU-heavy part), then folded
// into the tracker in stream order with one script call per journal shard,
// and acknowledged together.
// A record that fails for a reason that may pass stays pending: the relay
// re-runs it once it has been idle a while.
func (d *Deriver) handle(ctx context.Context, shard int, msgs []redis.XMessage) {
	if b := d.prepare(ctx, shard, msgs); b != nil {
		d.finish(ctx, b)
	}
}

// batch is a read batch prepared for the tracker.
type batch struct {
	shard   int
	start   time.Time
	recs    []ingest.Record
	raws    []*ingest.Delivery
	rawErrs []error
	facts   []*github.Fact
	errs    []error
}

// prepare normalizes a batch in parallel: a record that carries the fact
// the gateway normalized decodes it, the others (older records, operator
// redeliveries, payloads the gateway could not normalize) read their raw
// deliveries in one round trip and parse them. nil when the raw deliveries
// could not be read (the batch stays pending). It writes nothing, so the
// consumer prepares the next batch while the previous one is being folded
// in.
func (d *Deriver) prepare(ctx context.Context, shard int, msgs []redis.XMessage) *batch {
	n := len(msgs)
	b := &batch{shard: shard, start: time.Now(), recs: make([]ingest.Record, n),
		raws: make([]*ingest.Delivery, n), rawErrs: make([]error, n), facts: make([]*github.Fact, n), errs: make([]error, n)}
	var need []ingest.Record // records without a fact
	var at []int             // their places in the batch
	for i, m := range msgs {
		rec := ingest.ParseRecord(shard, m)
		b.recs[i] = rec
		if rec.Fact != nil {
			b.raws[i] = &ingest.Delivery{GUID: rec.GUID, Hook: rec.Hook, Workspace: rec.Workspace, Replay: rec.Replay}
			continue
		}
		need, at = append(need, rec), append(at, i)
	}
	var raws []*ingest.Delivery
	if len(need) > 0 {
		var errs []error
		var err error
		raws, errs, err = d.store.Raws(ctx, shard, need)
		if err != nil {
			if ctx.Err() == nil {
				d.log.Warn("read raw deliveries; will retry", "shard", shard, "err", err)
			}
			d.m.derived.WithLabelValues("retry").Add(float64(n))
			return nil
		}
		for k, i := range at {
			b.raws[i], b.rawErrs[i] = raws[k], errs[k]
		}
	}
	// A few workers take the records in turn (a goroutine per record would
	// grow a fresh stack for the parser each time).
	var wg sync.WaitGroup
	var next atomic.Int64
	for range min(n, 2*runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				switch {
				case b.recs[i].Fact != nil:
					// a fact that does not decode is set aside like a
					// payload that does not normalize; redelivering it
					// normalizes its raw body again
					b.facts[i], b.errs[i] = github.DecodeFact(b.recs[i].Fact)
				case b.rawErrs[i] == nil && b.raws[i].Ignored == "":
					b.facts[i], b.errs[i] = normalize(b.raws[i])
				}
			}
		}()
	}
	wg.Wait()
	// Nothing derived keeps a body (facts copy what they take), so the
	// batch's bodies go back to the pool now.
	ingest.Release(raws)
	return b
}

// finish folds a prepared batch into the tracker and acknowledges what it
// derived. Batches of one shard must finish in the order they were read.
func (d *Deriver) finish(ctx context.Context, b *batch) {
	shard, recs, raws, rawErrs, facts, errs := b.shard, b.recs, b.raws, b.rawErrs, b.facts, b.errs
	// Fold the batch into the tracker: one script call per journal shard,
	// every fact in stream order (ApplyBatch). What it could not fold in,
	// and the records that are not tracker input (expired, ignored,
	// poison), go through derive one by one: records about one subject in
	// stream order, different subjects concurrently (the tracker script is
	// atomic per repository, so they cannot interleave inside it).
	applied := d.applyBatch(ctx, recs, raws, rawErrs, facts, errs)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 4*runtime.GOMAXPROCS(0))
	var order []string
	groups := map[string][]int{}
	for i := range recs {
		k := recs[i].GUID
		if f := facts[i]; f != nil && f.Subject != "" {
			k = f.Subject
		} else if f != nil && f.Check != nil {
			k = f.Repo + "@" + f.Check.SHA
		}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	var mu sync.Mutex
	var done []string
	run := func(k string) {
		for _, i := range groups[k] {
			rec := recs[i]
			outcome := "journaled"
			if !applied[i] {
				var err error
				outcome, err = d.derive(ctx, rec, raws[i], rawErrs[i], facts[i], errs[i])
				if err != nil {
					d.m.derived.WithLabelValues("retry").Inc()
					if ctx.Err() == nil {
						d.log.Warn("derive failed; will retry", "shard", shard, "delivery_id", rec.GUID, "err", err)
					}
					return // the rest of this subject waits for the relay, in order
				}
			}
			d.m.derived.WithLabelValues(outcome).Inc()
			mu.Lock()
			done = append(done, rec.ID)
			mu.Unlock()
		}
	}
	for _, k := range order {
		if all(groups[k], applied) {
			run(k) // nothing left to do but count: no goroutine
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			run(k)
		}()
	}
	wg.Wait()
	if len(done) > 0 {
		d.m.lag.Set(time.Since(streamTime(recs[len(recs)-1].ID)).Seconds())
		if err := d.ack(ctx, shard, done...); err != nil && ctx.Err() == nil {
			d.log.Warn("ack ingest records", "shard", shard, "err", err)
		}
	}
	d.m.duration.Observe(time.Since(b.start).Seconds() / float64(len(recs)))
}

// ack acknowledges derived records and deletes them: once derived, a
// record (and the fact it may carry) is needed by nothing, and the raw
// delivery it points at is kept under its own key.
func (d *Deriver) ack(ctx context.Context, shard int, ids ...string) error {
	stream := d.store.StreamKey(shard)
	pipe := d.rdb.Pipeline()
	pipe.XAck(ctx, stream, group, ids...)
	pipe.XDel(ctx, stream, ids...)
	_, err := pipe.Exec(ctx)
	return err
}

// applyBatch folds every record of the batch that is tracker input into
// the tracker in one ApplyBatch and reports which it folded in; the
// others (and all of them after a panic) are left to derive.
func (d *Deriver) applyBatch(ctx context.Context, recs []ingest.Record, raws []*ingest.Delivery, rawErrs []error,
	facts []*github.Fact, errs []error) (applied []bool) {
	applied = make([]bool, len(recs))
	var items []tracker.Item
	var of []int
	for i := range recs {
		if rawErrs[i] != nil || raws[i].Ignored != "" || errs[i] != nil || facts[i] == nil || facts[i].Ignored != "" {
			continue
		}
		items = append(items, tracker.Item{Workspace: raws[i].Workspace, GUID: raws[i].GUID, Fact: facts[i]})
		of = append(of, i)
	}
	if len(items) == 0 {
		return applied
	}
	defer func() {
		if v := recover(); v != nil {
			d.log.Error("panic folding a batch into the tracker; deriving one by one", "panic", v)
			clear(applied)
		}
	}()
	for k, err := range d.tracker.ApplyBatch(ctx, items, d.cfg.Now()) {
		applied[of[k]] = err == nil
	}
	return applied
}

// all reports whether every record idx was applied.
func all(idx []int, applied []bool) bool {
	for _, i := range idx {
		if !applied[i] {
			return false
		}
	}
	return true
}

// normalize parses a committed delivery; a panic is an error.
func normalize(del *ingest.Delivery) (f *github.Fact, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic normalizing %s: %v", del.GUID, v)
		}
	}()
	payload := del.Body
	if del.ContentType == "application/x-www-form-urlencoded" {
		form, err := url.ParseQuery(string(del.Body))
		if err != nil {
			return nil, fmt.Errorf("form body: %w", err)
		}
		payload = []byte(form.Get("payload"))
	}
	fact, err := github.Normalize(del.Event, payload)
	if err != nil {
		return nil, err
	}
	if fact.Time.IsZero() {
		fact.Time = del.Received
	}
	return &fact, nil
}

// derive folds one normalized record into the tracker and returns its
// outcome, or an error when it must run again. A payload that cannot be
// normalized is permanent: set aside as poison.
func (d *Deriver) derive(ctx context.Context, rec ingest.Record, del *ingest.Delivery, rawErr error, fact *github.Fact, normErr error) (outcome string, err error) {
	switch {
	case errors.Is(rawErr, ingest.ErrNotFound):
		return "expired", nil
	case rawErr != nil:
		return d.poison(ctx, rec, rawErr.Error())
	case del.Ignored != "":
		return "ignored", nil
	case normErr != nil:
		return d.poison(ctx, rec, normErr.Error())
	case fact.Ignored != "":
		return "ignored", nil
	}
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic deriving %s: %v", rec.GUID, v)
		}
	}()
	_, err = d.tracker.Apply(ctx, del.Workspace, del.GUID, fact, d.cfg.Now())
	if errors.Is(err, tracker.ErrInvalidFact) {
		return d.poison(ctx, rec, err.Error())
	}
	if err != nil {
		return "", err
	}
	return "journaled", nil
}

func streamTime(id string) time.Time {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return time.UnixMilli(n)
}

// poison sets a record aside with its reason, for an operator to inspect
// and redeliver once fixed.
func (d *Deriver) poison(ctx context.Context, rec ingest.Record, reason string) (string, error) {
	err := d.rdb.XAdd(ctx, &redis.XAddArgs{
		Stream: d.store.Keys(rec.Shard).Poison(), MaxLen: 10000, Approx: true,
		Values: []any{"g", rec.GUID, "h", rec.Hook, "id", rec.ID, "reason", reason, "at", d.cfg.Now().UnixMilli()},
	}).Err()
	if err != nil {
		return "", fmt.Errorf("set aside %s: %w", rec.GUID, err)
	}
	d.log.Error("delivery set aside as poison", "delivery_id", rec.GUID, "reason", reason)
	return "poison", nil
}

// relayLoop re-runs records left pending, at start and every RelayEvery.
func (d *Deriver) relayLoop(ctx context.Context) {
	t := time.NewTicker(d.cfg.RelayEvery)
	defer t.Stop()
	for {
		for s := range d.store.Shards() {
			if _, err := d.Relay(ctx, s, d.cfg.MinIdle); err != nil && ctx.Err() == nil {
				d.log.Warn("relay", "shard", s, "err", err)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Relay claims the records of shard pending longer than minIdle (their
// consumer crashed or failed) and runs them again; a record delivered more
// than MaxRuns times is set aside as poison. It returns how many it ran.
func (d *Deriver) Relay(ctx context.Context, shard int, minIdle time.Duration) (int, error) {
	stream := d.store.StreamKey(shard)
	pend, err := d.rdb.XPendingExt(ctx, &redis.XPendingExtArgs{
		Stream: stream, Group: group, Idle: minIdle, Start: "-", End: "+", Count: 100,
	}).Result()
	if err != nil {
		if redis.HasErrorPrefix(err, "NOGROUP") {
			return 0, d.ensureGroup(ctx, shard)
		}
		return 0, fmt.Errorf("pending on ingest shard %d: %w", shard, err)
	}
	n := 0
	for _, p := range pend {
		msgs, err := d.rdb.XClaim(ctx, &redis.XClaimArgs{
			Stream: stream, Group: group, Consumer: d.consumer, MinIdle: minIdle, Messages: []string{p.ID},
		}).Result()
		if err != nil {
			return n, fmt.Errorf("claim %s: %w", p.ID, err)
		}
		if len(msgs) == 0 { // trimmed away, or claimed by another relay
			continue
		}
		if p.RetryCount >= d.cfg.MaxRuns {
			rec := ingest.ParseRecord(shard, msgs[0])
			if _, err := d.poison(ctx, rec, fmt.Sprintf("failed %d times", p.RetryCount)); err != nil {
				return n, err
			}
			d.m.derived.WithLabelValues("poison").Inc()
			_ = d.ack(ctx, shard, p.ID)
			continue
		}
		d.m.relayed.Inc()
		d.handle(ctx, shard, msgs)
		n++
	}
	return n, nil
}

// backoff waits exponentially longer after each infrastructure error, up
// to 5 s; such errors consume no attempt.
type backoff struct{ d time.Duration }

func newBackoff() *backoff { return &backoff{d: 50 * time.Millisecond} }
func (b *backoff) reset()  { b.d = 50 * time.Millisecond }
func (b *backoff) wait(ctx context.Context) {
	wait(ctx, b.d)
	b.d = min(b.d*2, 5*time.Second)
}

// wait returns after d, or sooner when ctx ends.
func wait(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
