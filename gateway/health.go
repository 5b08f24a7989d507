package gateway

import (
	"context"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/providers/event"
)

// healthReporter runs the health sweep's checks for one workspace and
// answers its report (package workers/health): a JSON document.
type healthReporter interface {
	ReportJSON(ctx context.Context, workspace string, now time.Time) (any, error)
}

// healthRoutes serves GET /v1/health/supervision (docs/design.md §9, §10): scope
// admin, for the token's workspace; an operator may name another with
// ?workspace=. Without a reporter the route is not served.
func (s *Server) healthRoutes(v1 *gin.RouterGroup) {
	if s.deps.Health == nil {
		return
	}
	v1.GET("/health/supervision", s.supervisionHealth)
}

func (s *Server) supervisionHealth(c *gin.Context) {
	claims := claimsOf(c)
	if !claims.Has("admin") && !claims.Has("operator") {
		abort(c, newProblem(http.StatusForbidden, "forbidden", "token lacks scope admin"))
		return
	}
	ws := claims.Workspace
	if other := c.Query("workspace"); other != "" && other != ws {
		if !claims.Has("operator") {
			abort(c, newProblem(http.StatusForbidden, "forbidden", "another workspace's health needs the operator scope"))
			return
		}
		if !event.ValidWorkspace(other) {
			abort(c, newProblem(http.StatusBadRequest, "malformed", "workspace is not a valid name"))
			return
		}
		ws = other
	}
	report, err := s.deps.Health.ReportJSON(c.Request.Context(), ws, s.cfg.Now())
	if err != nil {
		s.fail(c, "health report", err)
		return
	}
	c.JSON(http.StatusOK, report)
}
