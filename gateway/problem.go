package gateway

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
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

func unavailable(detail string) *problem {
	p := newProblem(http.StatusServiceUnavailable, "unavailable", detail)
	p.retryAfter = 5 * time.Second
	return p
}
