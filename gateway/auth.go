package gateway

import (
	"net/http"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/providers/agent"
)

// authenticate verifies the bearer token of every /v1 route and records
// that its party was seen (docs/design.md §2 liveness).
func (s *Server) authenticate(c *gin.Context) {
	h := c.GetHeader("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok || tok == "" {
		abort(c, newProblem(http.StatusUnauthorized, "unauthenticated", "missing bearer token"))
		return
	}
	claims, err := s.deps.Verifier.Verify(strings.TrimSpace(tok))
	if err != nil {
		abort(c, newProblem(http.StatusUnauthorized, "unauthenticated", err.Error()))
		return
	}
	c.Set(claimsKey, claims)
	// Seen before the handler, not after: after would hold a long-poll's
	// answer back by a round trip. Pushes record their pusher's sighting
	// in the commit script itself.
	if c.FullPath() != "/v1/events" || c.Request.Method != http.MethodPost {
		if err := s.deps.Sessions.Seen(c.Request.Context(), claims.Workspace, string(claims.Party()), s.cfg.Now()); err != nil {
			s.log.Debug("record sighting", "err", err)
		}
	}
	c.Next()
}

func claimsOf(c *gin.Context) *agent.Claims {
	v, _ := c.Get(claimsKey)
	cl, _ := v.(*agent.Claims)
	return cl
}

// requireScope answers 403 unless the token carries scope.
func (s *Server) requireScope(scope string) gin.HandlerFunc {
	return func(c *gin.Context) {
		if !claimsOf(c).Has(scope) {
			abort(c, newProblem(http.StatusForbidden, "forbidden", "token lacks scope "+scope))
			return
		}
		c.Next()
	}
}

func jwtTime(t time.Time) *jwt.NumericDate { return jwt.NewNumericDate(t) }
