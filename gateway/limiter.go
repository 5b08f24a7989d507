package gateway

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
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

// ingestLimiter takes a request's events from the ingest limits of its
// workspace and token (package delivery/ratelimit: in Redis, one limit for
// every gateway of the deployment).
type ingestLimiter interface {
	Allow(ctx context.Context, workspace, token string, n int) (wait time.Duration, ok bool, err error)
}

// allow takes n events from the ingest limits. When it cannot, it answers
// the request itself and returns false: 429 with Retry-After over the
// limit, or 503 when Redis does not answer within the commit's bound (the
// commit needs Redis as well, so a request waits for Redis once, and a
// Redis outage is answered within the bound, not after two of them).
func (s *Server) allow(c *gin.Context, workspace, token string, n int) bool {
	if s.deps.Limiter == nil {
		return true
	}
	ctx, cancel := s.commitContext(c)
	defer cancel()
	wait, ok, err := s.deps.Limiter.Allow(ctx, workspace, token, n)
	switch {
	case err != nil:
		s.fail(c, "ingest rate limit", err)
		return false
	case !ok:
		p := newProblem(http.StatusTooManyRequests, "rate-limited", "ingest rate limit reached for this workspace or token")
		p.retryAfter = wait
		abort(c, p)
		return false
	}
	return true
}
