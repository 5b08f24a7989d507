package ghapp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/github/app"
)

// refusedOnPurpose are the answers wakegate's own gateway gives a delivery
// it will refuse again however often GitHub sends it (gateway/github.go):
//
//	400 missing or malformed X-GitHub-Event / X-GitHub-Delivery, a form
//	    body without payload=, a payload that is not JSON
//	401 a missing, SHA-1-only or wrong X-Hub-Signature-256
//	403 a delivery for another App (X-GitHub-Hook-Installation-Target-ID)
//	413 a body over WAKEGATE_MAX_BODY
//	415 a content type other than JSON or form
//
// Everything else that is not 2xx — 5xx (Redis unreachable answers 503),
// a timeout or a connection GitHub could not make (no status code), 404 or
// 429 from something in front of wakegate — is a miss and is redelivered.
var refusedOnPurpose = map[int]bool{400: true, 401: true, 403: true, 413: true, 415: true}

// What a sweep did with a failed GUID.
const (
	skipRedelivered     = "redelivered"
	skipRedeliverFailed = "redeliver_failed"
	skipRefused         = "refused_on_purpose"
	skipAlready         = "already_redelivered"
)

// SweepConfig tunes the sweeper. Zero values take the defaults.
type SweepConfig struct {
	Prefix string        // WAKEGATE_REDIS_PREFIX; default keyspace.DefaultPrefix
	Every  time.Duration // periodic sweep; default 5m
	// FirstWindow is how far back the very first sweep looks (no
	// watermark yet); default 24h (GitHub keeps deliveries 3 days).
	FirstWindow time.Duration
	// Overlap is how far before the watermark a sweep starts again, for
	// deliveries GitHub recorded after the previous sweep listed (one in
	// flight takes up to 10 s) and for clock skew; default 2m. Nothing is
	// redelivered twice: each redelivered GUID is remembered.
	Overlap time.Duration
	// Remember is how long a redelivered GUID is remembered; default 4
	// days (GitHub's 3-day redelivery window and then some).
	Remember time.Duration
	// MaxPages bounds the pages one sweep reads (100 deliveries each);
	// default 1000. A sweep that stops there does not advance the
	// watermark.
	MaxPages int
	// Timeout bounds one sweep; default 9m (the lock lasts 10m).
	Timeout time.Duration
	Now     func() time.Time
}

func (c SweepConfig) withDefaults() SweepConfig {
	if c.Prefix == "" {
		c.Prefix = keyspace.DefaultPrefix
	}
	if c.Every <= 0 {
		c.Every = 5 * time.Minute
	}
	if c.FirstWindow <= 0 {
		c.FirstWindow = 24 * time.Hour
	}
	if c.Overlap <= 0 {
		c.Overlap = 2 * time.Minute
	}
	if c.Remember <= 0 {
		c.Remember = 4 * 24 * time.Hour
	}
	if c.MaxPages <= 0 {
		c.MaxPages = 1000
	}
	if c.Timeout <= 0 {
		c.Timeout = 9 * time.Minute
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Sweeper finds App webhook deliveries that never got through and asks
// GitHub to redeliver them (notes/github-webhooks.md §2.4).
type Sweeper struct {
	c   *app.Client
	rdb redis.UniversalClient
	k   keys
	cfg SweepConfig
	log *slog.Logger
	m   *sweepMetrics
}

// NewSweeper returns a sweeper; its metrics are registered on reg.
func NewSweeper(c *app.Client, rdb redis.UniversalClient, log *slog.Logger, reg prometheus.Registerer, cfg SweepConfig) *Sweeper {
	cfg = cfg.withDefaults()
	return &Sweeper{c: c, rdb: rdb, k: keys{cfg.Prefix}, cfg: cfg, log: log.With("component", "github_sweep"), m: newSweepMetrics(reg)}
}

// Report is what one sweep did: the answer of POST
// /admin/github/redeliver-failed.
type Report struct {
	Since       time.Time `json:"since"` // the oldest delivered_at considered
	Until       time.Time `json:"until"` // when the sweep began listing
	Pages       int       `json:"pages"`
	Scanned     int       `json:"scanned"`   // deliveries in [since, until]
	GUIDs       int       `json:"guids"`     // distinct GUIDs among them
	Succeeded   int       `json:"succeeded"` // GUIDs with a successful attempt
	Failed      []string  `json:"failed"`    // GUIDs with no successful attempt
	Redelivered []string  `json:"redelivered"`
	Skipped     []Skipped `json:"skipped"` // failed GUIDs not redelivered, and why
	// Watermark is where the next periodic sweep starts (before its
	// overlap); unchanged when this sweep could not cover it.
	Watermark time.Time `json:"watermark"`
}

// Skipped is a failed GUID the sweep did not redeliver.
type Skipped struct {
	GUID   string `json:"guid"`
	Reason string `json:"reason"` // refused_on_purpose | already_redelivered | redeliver_failed
	// StatusCode is wakegate's answer for refused_on_purpose.
	StatusCode int    `json:"status_code,omitempty"`
	Error      string `json:"error,omitempty"` // redeliver_failed: what GitHub answered
}

// Every is the period of the periodic sweeps (SweepConfig.Every).
func (s *Sweeper) Every() time.Duration { return s.cfg.Every }

// Tick is one periodic sweep from the watermark (the worker's scheduler
// runs it once per Every() across all workers).
func (s *Sweeper) Tick(ctx context.Context, _ time.Time) error {
	rep, err := s.Sweep(ctx, time.Time{})
	if errors.Is(err, ErrBusy) {
		return nil // an operator's sweep is running: it covers this tick
	}
	if err == nil && (len(rep.Failed) > 0 || len(rep.Redelivered) > 0) {
		s.log.Info("missed-delivery sweep", "scanned", rep.Scanned, "failed", len(rep.Failed),
			"redelivered", len(rep.Redelivered), "skipped", len(rep.Skipped))
	}
	return err
}

// RedeliverFailed is the on-demand sweep of POST
// /admin/github/redeliver-failed?since=: Sweep from since (zero: from the
// watermark). It answers ErrBusy while another sweep runs.
func (s *Sweeper) RedeliverFailed(ctx context.Context, since time.Time) (Report, error) {
	return s.Sweep(ctx, since)
}

// Sweep pages the App's deliveries newest first back to since (zero: the
// stored watermark minus the overlap, or FirstWindow ago the first time),
// groups them by GUID, and asks GitHub to redeliver, once per GUID ever,
// each GUID with no successful attempt that wakegate did not refuse on
// purpose. The watermark then moves to the start of this sweep, or, when a
// redelivery failed, to that GUID's oldest attempt so the next sweep tries
// again; a sweep from an explicit since later than the watermark leaves
// it. One sweep runs at a time (ErrBusy otherwise).
func (s *Sweeper) Sweep(ctx context.Context, since time.Time) (rep Report, err error) {
	defer func() {
		switch {
		case errors.Is(err, ErrBusy):
			s.m.sweeps.WithLabelValues("busy").Inc()
		case err != nil:
			s.m.sweeps.WithLabelValues("error").Inc()
		default:
			s.m.sweeps.WithLabelValues("ok").Inc()
		}
	}()
	l, ok, err := acquire(ctx, s.rdb, s.k.sweepLock(), s.cfg.Timeout+time.Minute)
	if err != nil {
		return Report{}, err
	}
	if !ok {
		return Report{}, ErrBusy
	}
	defer func() { _ = l.release(context.WithoutCancel(ctx)) }()
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()

	rep.Until = s.cfg.Now().UTC()
	watermark, err := s.watermark(ctx)
	if err != nil {
		return Report{}, err
	}
	explicit := !since.IsZero()
	switch {
	case explicit:
		rep.Since = since.UTC()
	case watermark.IsZero():
		rep.Since = rep.Until.Add(-s.cfg.FirstWindow)
	default:
		rep.Since = watermark.Add(-s.cfg.Overlap)
	}
	rep.Watermark = watermark

	groups, order, complete, err := s.list(ctx, rep.Since, &rep)
	if err != nil {
		return rep, err
	}
	rep.GUIDs = len(order)
	rep.Failed, rep.Redelivered, rep.Skipped = []string{}, []string{}, []Skipped{}
	next := rep.Until // where the watermark may move: before the oldest GUID left to retry
	for _, guid := range order {
		g := groups[guid]
		if g.succeeded {
			rep.Succeeded++
			continue
		}
		rep.Failed = append(rep.Failed, guid)
		skip, err := s.handle(ctx, guid, g)
		if err != nil {
			return rep, err // Redis: nothing past this GUID was handled
		}
		if skip.Reason == skipRedelivered {
			rep.Redelivered = append(rep.Redelivered, guid)
		} else {
			rep.Skipped = append(rep.Skipped, skip)
		}
		s.m.guids.WithLabelValues(skip.Reason).Inc()
		if skip.Reason == skipRedeliverFailed && g.oldest.Before(next) {
			next = g.oldest
		}
	}
	// Advance only over what was handled: a sweep that stopped at
	// MaxPages did not see the older end of its window, and one from a
	// since after the watermark did not see the range in between.
	if complete && (!explicit || watermark.IsZero() || !rep.Since.After(watermark)) {
		if err := s.rdb.Set(ctx, s.k.sweepWatermark(), strconv.FormatInt(next.UnixMilli(), 10), 0).Err(); err != nil {
			return rep, fmt.Errorf("store sweep watermark: %w", err)
		}
		rep.Watermark = next
	}
	return rep, nil
}

func (s *Sweeper) watermark(ctx context.Context) (time.Time, error) {
	v, err := s.rdb.Get(ctx, s.k.sweepWatermark()).Result()
	if errors.Is(err, redis.Nil) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, fmt.Errorf("read sweep watermark: %w", err)
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		return time.Time{}, fmt.Errorf("sweep watermark %q: %w", v, err)
	}
	return time.UnixMilli(ms).UTC(), nil
}

// attempts are the deliveries of one GUID within the window.
type attempts struct {
	succeeded bool
	refused   int       // a status wakegate refuses on purpose, 0 if none
	newest    int64     // delivery id to redeliver: the newest attempt
	oldest    time.Time // delivered_at of the oldest attempt
}

// list pages GET /app/hook/deliveries (cursor in the Link header, newest
// first) until a delivery older than since, and groups what is in the
// window by GUID, newest GUID first. complete is false when it stopped at
// MaxPages before reaching since.
func (s *Sweeper) list(ctx context.Context, since time.Time, rep *Report) (map[string]*attempts, []string, bool, error) {
	groups := map[string]*attempts{}
	var order []string
	opts := &gh.ListCursorOptions{PerPage: 100}
	for {
		if rep.Pages == s.cfg.MaxPages {
			return groups, order, false, nil
		}
		ds, resp, err := s.c.App().Apps.ListHookDeliveries(ctx, opts)
		if err != nil {
			return nil, nil, false, fmt.Errorf("list app hook deliveries: %w", err)
		}
		rep.Pages++
		reachedSince := false
		for _, d := range ds {
			at := d.GetDeliveredAt().Time
			if at.IsZero() {
				continue // no time: cannot be placed in the window (GitHub always sends one)
			}
			if at.Before(since) {
				reachedSince = true
				continue
			}
			guid := d.GetGUID()
			if guid == "" || d.GetID() == 0 {
				continue
			}
			rep.Scanned++
			s.m.scanned.Inc()
			g := groups[guid]
			if g == nil {
				g = &attempts{oldest: at}
				groups[guid] = g
				order = append(order, guid)
			}
			code := d.GetStatusCode()
			if code >= 200 && code < 300 {
				g.succeeded = true
			}
			if refusedOnPurpose[code] {
				g.refused = code
			}
			if d.GetID() > g.newest {
				g.newest = d.GetID()
			}
			if at.Before(g.oldest) {
				g.oldest = at
			}
		}
		if reachedSince || resp.Cursor == "" {
			return groups, order, true, nil
		}
		opts.Cursor = resp.Cursor
	}
}

// handle decides one failed GUID and redelivers it when it should. The
// GUID is claimed in Redis before asking GitHub, so two sweeps never both
// ask; a request GitHub did not accept gives the claim back.
func (s *Sweeper) handle(ctx context.Context, guid string, g *attempts) (Skipped, error) {
	if g.refused != 0 {
		return Skipped{GUID: guid, Reason: skipRefused, StatusCode: g.refused}, nil
	}
	claimed, err := s.rdb.SetNX(ctx, s.k.redelivered(guid), s.cfg.Now().UTC().Format(time.RFC3339), s.cfg.Remember).Result()
	if err != nil {
		return Skipped{}, fmt.Errorf("remember redelivery of %s: %w", guid, err)
	}
	if !claimed {
		return Skipped{GUID: guid, Reason: skipAlready}, nil
	}
	_, _, err = s.c.App().Apps.RedeliverHookDelivery(ctx, g.newest)
	var accepted *gh.AcceptedError
	if err == nil || errors.As(err, &accepted) {
		// GitHub answers 202 Accepted, which go-github reports as an
		// AcceptedError: the redelivery is scheduled.
		return Skipped{GUID: guid, Reason: skipRedelivered}, nil
	}
	if derr := s.rdb.Del(context.WithoutCancel(ctx), s.k.redelivered(guid)).Err(); derr != nil {
		return Skipped{}, fmt.Errorf("redeliver %s: %w (and its claim stays: %w)", guid, err, derr)
	}
	s.log.Warn("redeliver failed; the next sweep tries again", "delivery_id", guid, "err", err)
	return Skipped{GUID: guid, Reason: skipRedeliverFailed, Error: err.Error()}, nil
}
