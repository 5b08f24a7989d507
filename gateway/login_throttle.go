package gateway

import (
	"net/http"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
	"golang.org/x/time/rate"
)

// Failed operator logins are throttled per client address (docs/design.md
// §10): loginBurst wrong passwords at once, then one more per loginEvery.
// While an address has none left, its logins — right or wrong — are
// answered 429 with Retry-After before the password is looked at.
const (
	loginBurst     = 10
	loginEvery     = 6 * time.Second
	loginAddresses = 10000 // addresses tracked at most; full buckets go first
)

// loginThrottle holds a bucket of failed logins per client address. Buckets
// live in this process: N gateways allow N times the rate.
type loginThrottle struct {
	mu  sync.Mutex
	by  map[string]*rate.Limiter
	now func() time.Time
}

func newLoginThrottle(now func() time.Time) *loginThrottle {
	return &loginThrottle{by: map[string]*rate.Limiter{}, now: now}
}

// wait is how long addr must wait before its next login is looked at; 0:
// now.
func (l *loginThrottle) wait(addr string) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.by[addr]
	if b == nil {
		return 0
	}
	now := l.now()
	if b.TokensAt(now) >= 1 {
		return 0
	}
	r := b.ReserveN(now, 1)
	d := r.DelayFrom(now)
	r.CancelAt(now)
	return max(d, time.Second)
}

// failed counts a wrong password from addr.
func (l *loginThrottle) failed(addr string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	b := l.by[addr]
	if b == nil {
		if len(l.by) >= loginAddresses {
			l.pruneLocked(now)
		}
		b = rate.NewLimiter(rate.Every(loginEvery), loginBurst)
		l.by[addr] = b
	}
	b.AllowN(now, 1)
}

// pruneLocked forgets the addresses whose bucket is full again, then, if
// as many are still tracked, any others down to three quarters.
func (l *loginThrottle) pruneLocked(now time.Time) {
	for a, b := range l.by {
		if b.TokensAt(now) >= loginBurst {
			delete(l.by, a)
		}
	}
	for a := range l.by {
		if len(l.by) < loginAddresses*3/4 {
			break
		}
		delete(l.by, a)
	}
}

// operatorLoginAllowed answers 429 with Retry-After, and returns false,
// while c's address is throttled; every route that takes the operator
// password asks it before looking at the password.
func (s *Server) operatorLoginAllowed(c *gin.Context) bool {
	wait := s.logins.wait(c.RemoteIP())
	if wait <= 0 {
		return true
	}
	s.metrics.operatorLogins.WithLabelValues("throttled").Inc()
	p := newProblem(http.StatusTooManyRequests, "rate-limited", "too many failed operator logins from this address; retry later")
	p.retryAfter = wait
	abort(c, p)
	return false
}

// operatorLoginFailed counts a wrong operator password from c's address.
func (s *Server) operatorLoginFailed(c *gin.Context) {
	s.logins.failed(c.RemoteIP())
	s.metrics.operatorLogins.WithLabelValues("failed").Inc()
}
