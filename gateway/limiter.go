package gateway

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Limits are the ingest rate limits (WAKEGATE_INGEST_LIMITS), events per
// second; bursts are twice the rate. Zero means unlimited.
type Limits struct {
	Workspace float64
	Token     float64
}

// ParseLimits parses "workspace=5000/s,token=1000/s".
func ParseLimits(spec string) (Limits, error) {
	l := Limits{Workspace: 5000, Token: 1000}
	for _, part := range strings.Split(spec, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		k, v, ok := strings.Cut(part, "=")
		n, unit, ok2 := strings.Cut(v, "/")
		r, err := strconv.ParseFloat(n, 64)
		if !ok || !ok2 || err != nil || r < 0 {
			return l, fmt.Errorf("ingest limit %q: want name=N/s", part)
		}
		switch unit {
		case "s":
		case "m":
			r /= 60
		default:
			return l, fmt.Errorf("ingest limit %q: unit must be /s or /m", part)
		}
		switch k {
		case "workspace":
			l.Workspace = r
		case "token":
			l.Token = r
		default:
			return l, fmt.Errorf("ingest limit %q: name must be workspace or token", part)
		}
	}
	return l, nil
}

// limiter holds a token bucket per workspace and per token. Buckets live
// in this process: N gateways admit up to N times the limit, which keeps
// one tenant's flood from starving another without a Redis round trip.
type limiter struct {
	limits Limits
	mu     sync.Mutex
	ws     map[string]*rate.Limiter
	tok    map[string]*rate.Limiter
}

func newLimiter(l Limits) *limiter {
	return &limiter{limits: l, ws: map[string]*rate.Limiter{}, tok: map[string]*rate.Limiter{}}
}

// allow takes n events from both buckets, or says how long to wait.
func (l *limiter) allow(workspace, token string, n int, now time.Time) (time.Duration, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := bucket(l.ws, workspace, l.limits.Workspace)
	t := bucket(l.tok, token, l.limits.Token)
	rw := reserve(w, n, now)
	rt := reserve(t, n, now)
	wait := max(delay(rw, now), delay(rt, now))
	if wait > 0 {
		for _, r := range []*rate.Reservation{rw, rt} {
			if r != nil {
				r.CancelAt(now)
			}
		}
		if wait < time.Second {
			wait = time.Second
		}
		return wait, false
	}
	return 0, true
}

func bucket(m map[string]*rate.Limiter, key string, r float64) *rate.Limiter {
	if r <= 0 {
		return nil
	}
	b, ok := m[key]
	if !ok {
		if len(m) > 100_000 { // bounded: a forgotten bucket is a full one
			clear(m)
		}
		b = rate.NewLimiter(rate.Limit(r), int(2*r)+1)
		m[key] = b
	}
	return b
}

func reserve(b *rate.Limiter, n int, now time.Time) *rate.Reservation {
	if b == nil {
		return nil
	}
	return b.ReserveN(now, n)
}

func delay(r *rate.Reservation, now time.Time) time.Duration {
	if r == nil {
		return 0
	}
	if !r.OK() {
		return time.Minute
	}
	return r.DelayFrom(now)
}
