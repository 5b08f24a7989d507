package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/kind"
)

// problem is an RFC 9457 problem detail. Extension members carry what a
// client acts on (per-event errors, a lease holder), never internals.
type problem struct {
	Type     string `json:"type"`
	Title    string `json:"title"`
	Status   int    `json:"status"`
	Detail   string `json:"detail,omitempty"`
	Instance string `json:"instance,omitempty"`
	Errors   any    `json:"errors,omitempty"`
	Holder   string `json:"holder,omitempty"`
	Epoch    int64  `json:"epoch,omitempty"` // a controller lease's fencing epoch, with holder
	// Hooks are the hook scopes a delivery is stored under, when a
	// redelivery by GUID alone finds several.
	Hooks []string `json:"hooks,omitempty"`

	retryAfter time.Duration
}

// problemBase prefixes every problem type: a stable documented URI.
const problemBase = "https://wakegate.dev/problems/"

// Problems by type; titles are constant per type.
var titles = map[string]string{
	"malformed":          "Malformed request",
	"unauthenticated":    "Unauthenticated",
	"forbidden":          "Forbidden",
	"not-found":          "Not found",
	"unsupported-media":  "Unsupported media type",
	"too-large":          "Payload too large",
	"timeout":            "Request timeout",
	"invalid-events":     "Invalid events",
	"conflict":           "Conflict",
	"rate-limited":       "Too many requests",
	"unavailable":        "Service unavailable",
	"upstream":           "Bad gateway",
	"internal":           "Internal error",
	"method-not-allowed": "Method not allowed",
	"unprocessable":      "Unprocessable request",
	"not_controller":     "Not the controller",
	"limit-reached":      "Limit reached",
}

func newProblem(status int, typ, detail string) *problem {
	return &problem{Type: problemBase + typ, Title: titles[typ], Status: status, Detail: detail}
}

// abort writes p as the answer and stops the handler chain.
func abort(c *gin.Context, p *problem) {
	p.Instance = c.GetString(requestIDKey)
	if p.retryAfter > 0 {
		c.Header("Retry-After", strconv.Itoa(int((p.retryAfter+time.Second-1)/time.Second)))
	}
	if p.Status == http.StatusUnauthorized && c.Writer.Header().Get("WWW-Authenticate") == "" {
		c.Header("WWW-Authenticate", `Bearer realm="wakegate"`)
	}
	c.Set(problemKey, p.Type)
	body, _ := json.Marshal(p)
	c.Abort()
	c.Data(p.Status, "application/problem+json", body)
}

// problemFor is the problem that answers err (docs/design.md §13): by
// its kind (package providers/kind), with err's text as the detail; a
// controller lease held carries its holder and epoch; a body over its
// limit is 413. An error of no kind is storage failing: 503, and the
// client retries (nothing was acknowledged).
func problemFor(err error) *problem {
	var held *supervision.HeldError
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &held):
		p := newProblem(http.StatusConflict, "conflict", err.Error())
		p.Holder, p.Epoch = held.Holder, held.Epoch
		return p
	case errors.As(err, &tooBig):
		return newProblem(http.StatusRequestEntityTooLarge, "too-large", "body over the size limit")
	}
	switch {
	case errors.Is(err, kind.Invalid):
		return newProblem(http.StatusBadRequest, "malformed", err.Error())
	case errors.Is(err, kind.Unprocessable):
		return newProblem(http.StatusUnprocessableEntity, "unprocessable", err.Error())
	case errors.Is(err, kind.NotFound):
		return newProblem(http.StatusNotFound, "not-found", err.Error())
	case errors.Is(err, kind.Conflict):
		return newProblem(http.StatusConflict, "conflict", err.Error())
	case errors.Is(err, kind.Forbidden):
		return newProblem(http.StatusForbidden, "forbidden", err.Error())
	case errors.Is(err, kind.TooLarge):
		return newProblem(http.StatusRequestEntityTooLarge, "too-large", err.Error())
	case errors.Is(err, kind.Limit):
		return newProblem(http.StatusUnprocessableEntity, "limit-reached", err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		// Redis may be healthy and this process overloaded: say both.
		return unavailable("the commit did not finish in time (storage slow or gateway overloaded); retry")
	}
	return unavailable("storage unavailable; retry")
}

// failed is problemFor(err), having logged and counted it when it is a
// 5xx (here, once: the caller only answers). what names the operation.
func (s *Server) failed(c *gin.Context, what string, err error) *problem {
	p := problemFor(err)
	if p.Status >= 500 {
		s.log.Error("commit failed", "what", what, "request_id", c.GetString(requestIDKey), "err", err)
		s.metrics.storeErrors.Inc()
	}
	return p
}

// fail answers err as failed does.
func (s *Server) fail(c *gin.Context, what string, err error) { abort(c, s.failed(c, what, err)) }

func unavailable(detail string) *problem {
	p := newProblem(http.StatusServiceUnavailable, "unavailable", detail)
	p.retryAfter = 5 * time.Second
	return p
}
