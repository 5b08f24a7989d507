package outbound

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
)

// BreakerConfig tunes the per-endpoint circuit breaker (docs/design.md §8). Zero
// values take the defaults.
type BreakerConfig struct {
	// Failures in a row that open the breaker. Default 5.
	Failures int
	// Ratio of failed attempts among at least MinAttempts in Window that
	// opens it. Defaults 0.7, 10 and 5m.
	Ratio       float64
	MinAttempts int
	Window      time.Duration
	// OpenFor is how long it stays open before one probe. Default 30s.
	OpenFor time.Duration
	// ProbeFor bounds a probe: other attempts wait this long for its
	// outcome (an attempt's timeout and some). Default 15s.
	ProbeFor time.Duration
}

func (c BreakerConfig) withDefaults() BreakerConfig {
	if c.Failures <= 0 {
		c.Failures = 5
	}
	if c.Ratio <= 0 || c.Ratio > 1 {
		c.Ratio = 0.7
	}
	if c.MinAttempts <= 0 {
		c.MinAttempts = 10
	}
	if c.Window <= 0 {
		c.Window = 5 * time.Minute
	}
	if c.OpenFor <= 0 {
		c.OpenFor = 30 * time.Second
	}
	if c.ProbeFor <= 0 {
		c.ProbeFor = 15 * time.Second
	}
	return c
}

// Breaker is the circuit breaker of every endpoint, kept in Redis so all
// workers share it. Closed, attempts go through; open, they wait until
// the open period ends; then exactly one attempt (the probe) goes through
// while the others wait for its outcome: a success closes the breaker, a
// failure opens it again. It is safe for concurrent use.
type Breaker struct {
	rdb    redis.UniversalClient
	prefix string
	cfg    BreakerConfig
}

// NewBreaker returns the breakers stored on rdb under prefix.
func NewBreaker(rdb redis.UniversalClient, prefix string, cfg BreakerConfig) *Breaker {
	return &Breaker{rdb: rdb, prefix: prefixOr(prefix), cfg: cfg.withDefaults()}
}

// allowScript decides whether an attempt may go out now.
// Its KEYS, ARGV and reply are in allow.lua.
//
//go:embed allow.lua
var allowLua string

var allowScript = keyspace.NewScript("delivery/outbound/allow.lua", allowLua)

// recordScript records an attempt's outcome and opens or closes the
// breaker.
// Its KEYS, ARGV and reply are in record.lua.
//
//go:embed record.lua
var recordLua string

var recordScript = keyspace.NewScript("delivery/outbound/record.lua", recordLua)

// Allow reports whether an attempt to the endpoint of (workspace, party)
// may go out at now; when not, wait is when to try again. An allowed
// attempt while the breaker is half-open is its probe: the caller must
// Record its outcome.
func (b *Breaker) Allow(ctx context.Context, workspace, party string, now time.Time) (ok bool, wait time.Time, err error) {
	k := endpointKeys(b.prefix, workspace, party)
	until, err := allowScript.Run(ctx, b.rdb, []string{k.breaker}, now.UnixMilli(), b.cfg.ProbeFor.Milliseconds()).Int64()
	if err != nil {
		return false, time.Time{}, fmt.Errorf("breaker of %s: %w", party, err)
	}
	if until == 0 {
		return true, time.Time{}, nil
	}
	return false, time.UnixMilli(until), nil
}

// Record records the outcome of an attempt made at now. It returns when
// the breaker is open until (zero when closed).
func (b *Breaker) Record(ctx context.Context, workspace, party string, success bool, now time.Time) (time.Time, error) {
	k := endpointKeys(b.prefix, workspace, party)
	var id [8]byte
	_, _ = rand.Read(id[:])
	ok := "0"
	if success {
		ok = "1"
	}
	c := b.cfg
	open, err := recordScript.Run(ctx, b.rdb, []string{k.breaker, k.window}, now.UnixMilli(), ok, hex.EncodeToString(id[:]),
		c.Failures, c.Ratio, c.MinAttempts, c.Window.Milliseconds(), c.OpenFor.Milliseconds()).Int64()
	if err != nil {
		return time.Time{}, fmt.Errorf("breaker of %s: %w", party, err)
	}
	if open == 0 {
		return time.Time{}, nil
	}
	return time.UnixMilli(open), nil
}
