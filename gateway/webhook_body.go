package gateway

import (
	"io"
	"net/http"
	"sync"

	"github.com/gin-gonic/gin"
)

// webhookBodies holds the buffers webhook bodies are read into. A GitHub
// delivery is typically 5–30 KB: reading it into a buffer sized by its
// Content-Length, and reusing that buffer, saves io.ReadAll's doublings
// (and their garbage) on every request of the ingest hot path.
var webhookBodies = sync.Pool{New: func() any { b := make([]byte, 0, 32<<10); return &b }}

// maxPooledBody bounds the buffers kept for reuse; larger bodies (up to
// the 25 MB limit) are read into a buffer of their own.
const maxPooledBody = 1 << 20

// maxPresized bounds the buffer allocated ahead for a declared length.
const maxPresized = 256 << 10

// readWebhookBody is readBody for the webhook route: the same limits, the
// same guard and the same answers, but the body is read into a
// pooled buffer. The caller must not keep body (nor anything aliasing it)
// after calling release.
func (s *Server) readWebhookBody(c *gin.Context, limit int64) (body []byte, release func()) {
	if !s.checkLength(c, limit) {
		return nil, nil
	}
	bp := webhookBodies.Get().(*[]byte)
	buf := (*bp)[:0]
	// Sized by the declared length only up to maxPresized: a length is a
	// promise, and a sender that declares much and sends slowly must hold
	// no more memory than it has sent (beyond this bound).
	if n := c.Request.ContentLength; n >= 0 && n < maxPresized && int64(cap(buf)) <= n {
		buf = make([]byte, 0, n+1) // +1: the read that sees EOF needs no growth
	}
	body, err := readAllInto(buf, http.MaxBytesReader(c.Writer, c.Request.Body, limit))
	release = func() {
		if cap(body) <= maxPooledBody {
			*bp = body[:0]
			webhookBodies.Put(bp)
		}
	}
	if err != nil {
		release()
		abort(c, readProblem(err))
		return nil, nil
	}
	return body, release
}

// readAllInto is io.ReadAll appending to b.
func readAllInto(b []byte, r io.Reader) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
	}
}
