package gateway

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"
	"github.com/hibiken/asynqmon"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// monitorPath is where asynqmon is mounted (docs/design.md §10: operator only).
const monitorPath = "/monitor"

// newMonitor returns asynqmon, read-only, on its own client built from
// rdb's options (asynqmon closes the client it is given), or nil when rdb
// is neither a single-node nor a cluster client.
func newMonitor(rdb redis.UniversalClient) *asynqmon.HTTPHandler {
	// The copy of an initialised client's options must not set up
	// maintenance notifications a second time (go-redis logs a failure).
	off := &maintnotifications.Config{Mode: maintnotifications.ModeDisabled}
	var opt connOpt
	switch c := rdb.(type) {
	case *redis.Client:
		opt.make = func() redis.UniversalClient {
			o := *c.Options()
			o.MaintNotificationsConfig = off
			return redis.NewClient(&o)
		}
	case *redis.ClusterClient:
		opt.make = func() redis.UniversalClient {
			o := *c.Options()
			o.MaintNotificationsConfig = off
			return redis.NewClusterClient(&o)
		}
	default:
		return nil
	}
	return asynqmon.New(asynqmon.Options{
		RootPath:         monitorPath,
		RedisConnOpt:     opt,
		ReadOnly:         true,
		PayloadFormatter: asynqmon.PayloadFormatterFunc(func(_ string, p []byte) string { return redact(p) }),
		ResultFormatter:  asynqmon.ResultFormatterFunc(func(_ string, p []byte) string { return redact(p) }),
	})
}

// connOpt is an asynq.RedisConnOpt that makes a client like the gateway's.
type connOpt struct{ make func() redis.UniversalClient }

func (o connOpt) MakeRedisClient() any { return o.make() }

// shownKeys are the task payload fields the monitor shows: ids, type,
// party, attempt and timing metadata (docs/design.md §10). Every other
// field — a body, an event, a coalesce key an agent chose, a secret, at
// any depth or stringified — is replaced by notShown.
var shownKeys = map[string]bool{
	"ws": true, "party": true, "seq": true, "seqs": true, "webhook_id": true, "kind": true, "format": true,
	"decided_at": true, "redelivery": true, "reason": true, "scope": true, "at": true,
}

const notShown = "[not shown]"

// redact renders a task payload (or result) as the monitor shows it: a
// JSON object keeps the values of shownKeys that are scalars or lists of
// numbers, every other value is notShown; anything else is not shown.
func redact(p []byte) string {
	var v map[string]any
	if err := json.Unmarshal(p, &v); err != nil {
		return "(not a JSON object, not shown)"
	}
	for k, x := range v {
		if !shownKeys[k] || !shownValue(x) {
			v[k] = notShown
		}
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func shownValue(v any) bool {
	switch t := v.(type) {
	case string:
		return len(t) <= 256
	case float64, bool, nil:
		return true
	case []any:
		for _, x := range t {
			if _, ok := x.(float64); !ok {
				return false
			}
		}
		return true
	}
	return false
}

// monitorRoutes mounts the monitor behind monitorAuth.
func (s *Server) monitorRoutes(r *gin.Engine) {
	if s.monitor == nil {
		return
	}
	h := gin.WrapH(s.monitor)
	r.GET(monitorPath, func(c *gin.Context) { c.Redirect(http.StatusMovedPermanently, monitorPath+"/") })
	r.Any(monitorPath+"/*rest", s.monitorAuth, h)
}

// monitorAuth lets an operator in: a bearer token with the operator scope
// (an admin token is refused), or HTTP Basic with the operator password
// (WAKEGATE_OPERATOR_PASSWORD_FILE; any user name) so a browser can open
// the UI.
func (s *Server) monitorAuth(c *gin.Context) {
	if tok, ok := strings.CutPrefix(c.GetHeader("Authorization"), "Bearer "); ok {
		claims, err := s.deps.Verifier.Verify(strings.TrimSpace(tok))
		switch {
		case err != nil:
			abort(c, newProblem(http.StatusUnauthorized, "unauthenticated", err.Error()))
		case !claims.Has("operator"):
			abort(c, newProblem(http.StatusForbidden, "forbidden", "the monitor needs the operator scope"))
		default:
			c.Set(claimsKey, claims)
			c.Next()
		}
		return
	}
	if user, pass, ok := c.Request.BasicAuth(); ok && len(s.cfg.OperatorPassword) > 0 {
		if !s.operatorLoginAllowed(c) {
			return
		}
		// The user is operator (docs/design.md §10). Compare digests:
		// constant time whatever the lengths.
		got, want := sha256.Sum256([]byte(pass)), sha256.Sum256(s.cfg.OperatorPassword)
		if subtle.ConstantTimeCompare(got[:], want[:])&subtle.ConstantTimeCompare([]byte(user), []byte("operator")) == 1 {
			c.Next()
			return
		}
		s.operatorLoginFailed(c)
	}
	if len(s.cfg.OperatorPassword) > 0 {
		c.Writer.Header().Add("WWW-Authenticate", `Basic realm="wakegate monitor", charset="UTF-8"`)
		c.Writer.Header().Add("WWW-Authenticate", `Bearer realm="wakegate"`)
	}
	abort(c, newProblem(http.StatusUnauthorized, "unauthenticated", "the monitor needs an operator token or the operator password"))
}
