package gateway

import (
	"errors"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"
)

// readBody reads a request body within the per-request limit and the
// gateway's in-flight budget; on failure it has answered and returns nil.
// The caller must call release once the body is no longer needed.
func (s *Server) readBody(c *gin.Context, limit int64) (body []byte, release func()) {
	reserve, ok := s.reserveBody(c, limit)
	if !ok {
		return nil, nil
	}
	release = func() { s.unreserveBody(reserve) }
	body, err := io.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	if err != nil {
		release()
		abort(c, readProblem(err))
		return nil, nil
	}
	return body, release
}

// readProblem is the answer to a body that could not be read: over the
// limit, or cut short.
func readProblem(err error) *problem {
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return problemFor(err)
	}
	return newProblem(http.StatusBadRequest, "malformed", "could not read the body")
}

// reserveBody checks the declared length against limit and reserves the
// body's bytes in the in-flight budget; on failure it has answered.
func (s *Server) reserveBody(c *gin.Context, limit int64) (reserve int64, ok bool) {
	if c.Request.ContentLength > limit {
		abort(c, newProblem(http.StatusRequestEntityTooLarge, "too-large", "body over the size limit"))
		return 0, false
	}
	reserve = c.Request.ContentLength
	if reserve < 0 {
		reserve = limit // unknown length: reserve the worst case
	}
	if s.inflight.Add(reserve) > s.cfg.InflightBytes {
		s.inflight.Add(-reserve)
		abort(c, unavailable("too many bytes in flight; retry"))
		return 0, false
	}
	s.metrics.inflight.Add(float64(reserve))
	return reserve, true
}

func (s *Server) unreserveBody(reserve int64) {
	s.inflight.Add(-reserve)
	s.metrics.inflight.Sub(float64(reserve))
}
