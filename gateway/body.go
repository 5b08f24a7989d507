package gateway

import (
	"errors"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/gin-gonic/gin"
)

// readBody reads a request body within the per-request limit; the bytes
// count in the gateway's in-flight budget as they arrive (guardBody). On
// failure it has answered and returns nil. The caller must call release
// once the body is no longer needed.
func (s *Server) readBody(c *gin.Context, limit int64) (body []byte, release func()) {
	if !s.checkLength(c, limit) {
		return nil, nil
	}
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		abort(c, readProblem(err))
		return nil, nil
	}
	return body, func() {}
}

var (
	// errBodyTimeout is a body that did not arrive within
	// WAKEGATE_BODY_TIMEOUT.
	errBodyTimeout = errors.New("request body not received in time")
	// errInflightFull is a body whose next bytes would overrun the
	// gateway's in-flight budget.
	errInflightFull = errors.New("too many bytes in flight")
)

// readProblem is the answer to a body that could not be read: over the
// limit, too slow, over the in-flight budget, or cut short.
func readProblem(err error) *problem {
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return problemFor(err)
	case errors.Is(err, errBodyTimeout):
		return newProblem(http.StatusRequestTimeout, "timeout", "the body did not arrive in time (WAKEGATE_BODY_TIMEOUT)")
	case errors.Is(err, errInflightFull):
		return unavailable("too many bytes in flight; retry")
	}
	return newProblem(http.StatusBadRequest, "malformed", "could not read the body")
}

// checkLength refuses a body whose declared length is over limit; on
// failure it has answered.
func (s *Server) checkLength(c *gin.Context, limit int64) bool {
	if c.Request.ContentLength > limit {
		abort(c, newProblem(http.StatusRequestEntityTooLarge, "too-large", "body over the size limit"))
		return false
	}
	return true
}

// guardBody bounds what a request body can hold while it arrives: a read
// deadline for the whole body (Config.BodyTimeout), the in-flight budget
// reserved as bytes arrive — never the declared or the maximal size — and
// at most Config.BodiesPerClient bodies unfinished at once per client
// address (429 beyond). A slow sender holds only the bytes it has sent,
// for at most the deadline, and only its own address's share.
func (s *Server) guardBody(c *gin.Context) {
	r := c.Request
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		c.Next()
		return
	}
	addr := c.RemoteIP() // "" for the in-process requests of /mcp tools
	if addr != "" && !s.bodies.acquire(addr) {
		s.metrics.bodiesRefused.WithLabelValues("per_client").Inc()
		c.Header("Connection", "close") // the body is never read
		p := newProblem(http.StatusTooManyRequests, "rate-limited", "too many unfinished request bodies from this address; retry")
		p.retryAfter = time.Second
		abort(c, p)
		return
	}
	// Not supported in process (the /mcp tools' requests): nothing to bound.
	_ = http.NewResponseController(c.Writer).SetReadDeadline(time.Now().Add(s.cfg.BodyTimeout))
	g := &guardedBody{rc: r.Body, s: s, addr: addr, counted: addr != ""}
	s.metrics.unfinished.Inc()
	r.Body = g
	defer g.release()
	c.Next()
}

// guardedBody is a request body under guardBody.
type guardedBody struct {
	rc      io.ReadCloser
	s       *Server
	addr    string
	counted bool // holds one of addr's unfinished bodies

	mu       sync.Mutex
	done     bool  // fully read, failed, or released
	reserved int64 // bytes of the in-flight budget this body holds
}

func (g *guardedBody) Read(p []byte) (int, error) {
	n, err := g.rc.Read(p)
	g.mu.Lock()
	defer g.mu.Unlock()
	if n > 0 {
		if g.s.inflight.Add(int64(n)) > g.s.cfg.InflightBytes {
			g.s.inflight.Add(-int64(n))
			g.finishLocked()
			g.s.metrics.bodiesRefused.WithLabelValues("budget").Inc()
			return 0, errInflightFull
		}
		g.reserved += int64(n)
		g.s.metrics.inflight.Add(float64(n))
	}
	if err != nil { // io.EOF included: the body is done
		g.finishLocked()
		if errors.Is(err, os.ErrDeadlineExceeded) {
			g.s.metrics.bodiesRefused.WithLabelValues("timeout").Inc()
			err = errBodyTimeout
		}
	}
	return n, err
}

func (g *guardedBody) Close() error { return g.rc.Close() }

// finishLocked ends the body's unfinished state once. The read deadline
// stays: net/http lifts it itself when the body ends (before it watches
// the connection for a hang-up), and for a body that failed or was left
// unread it bounds the server's drain of the rest.
func (g *guardedBody) finishLocked() {
	if g.done {
		return
	}
	g.done = true
	g.s.metrics.unfinished.Dec()
	if g.counted {
		g.s.bodies.release(g.addr)
	}
}

// release gives back the body's budget when its request ends.
func (g *guardedBody) release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.finishLocked()
	g.s.inflight.Add(-g.reserved)
	g.s.metrics.inflight.Sub(float64(g.reserved))
	g.reserved = 0
}

// bodyCounter counts unfinished bodies per client address.
type bodyCounter struct {
	mu  sync.Mutex
	n   map[string]int
	max int
}

func (b *bodyCounter) acquire(addr string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n[addr] >= b.max {
		return false
	}
	b.n[addr]++
	return true
}

func (b *bodyCounter) release(addr string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.n[addr]--; b.n[addr] <= 0 {
		delete(b.n, addr)
	}
}
