package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/workers/ghapp"
)

// The GitHub App side (docs/design.md §11): the on-demand missed-delivery sweep
// and the baseline fetch of a subscribed PR (package workers/ghapp).

// githubSweeper asks GitHub to redeliver what never got through.
type githubSweeper interface {
	RedeliverFailed(ctx context.Context, since time.Time) (ghapp.Report, error)
}

// githubBaseline fetches, once, an exact PR wakegate has never seen when
// someone subscribes to it, and watches subscribed PRs for reconciliation.
type githubBaseline interface {
	Baseline(ctx context.Context, workspace, subject string) error
}

// baselineTimeout bounds the GitHub calls a subscription waits for.
const baselineTimeout = 5 * time.Second

// githubRoutes registers the App's admin routes, when there is an App.
func (s *Server) githubRoutes(admin *gin.RouterGroup) {
	if s.deps.GitHubSweep != nil {
		admin.POST("/github/redeliver-failed", s.redeliverFailed)
	}
}

// redeliverFailed is POST /admin/github/redeliver-failed?since=<RFC 3339>
// (scope operator): one missed-delivery sweep now, from since (default:
// the stored watermark), answering what it did: 200 with the report; 409
// while another sweep runs; 502 when GitHub's API fails.
func (s *Server) redeliverFailed(c *gin.Context) {
	var since time.Time
	if v := c.Query("since"); v != "" {
		t, err := time.Parse(time.RFC3339, v)
		if err != nil {
			abort(c, newProblem(http.StatusBadRequest, "malformed", "since must be an RFC 3339 time such as 2024-05-01T12:00:00Z"))
			return
		}
		if t.After(s.cfg.Now()) {
			abort(c, newProblem(http.StatusBadRequest, "malformed", "since is in the future"))
			return
		}
		since = t
	}
	rep, err := s.deps.GitHubSweep.RedeliverFailed(c.Request.Context(), since)
	switch {
	case errors.Is(err, ghapp.ErrBusy):
		abort(c, newProblem(http.StatusConflict, "conflict", "a missed-delivery sweep is already running; retry when it ends"))
		return
	case err != nil:
		s.log.Error("missed-delivery sweep", "request_id", c.GetString(requestIDKey), "err", err)
		abort(c, newProblem(http.StatusBadGateway, "upstream", "the sweep did not finish (GitHub's API or storage failed); what it did before is kept, see the logs"))
		return
	}
	c.JSON(http.StatusOK, rep)
}

// githubBaseline lets the App see the GitHub subjects of a new
// subscription before it is stored: each is watched, and an exact PR never
// seen is fetched so that, merged already, its terminal record is there
// for the subscription's DeathWatch. It is bounded and best effort: a
// GitHub failure is logged and the subscription goes on.
func (s *Server) githubBaseline(ctx context.Context, workspace string, subjects []string) {
	if s.deps.GitHubBaseline == nil {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, baselineTimeout)
	defer cancel()
	for _, subj := range subjects {
		if !strings.HasPrefix(subj, "github:") {
			continue
		}
		if err := s.deps.GitHubBaseline.Baseline(ctx, workspace, subj); err != nil {
			s.log.Warn("github baseline fetch", "subject", subj, "err", err)
		}
	}
}
