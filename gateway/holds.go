package gateway

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/providers/event"
)

// holdStore is presence and quiet (package delivery/holds).
type holdStore interface {
	SetPresence(ctx context.Context, ws, party string, p holds.Presence, now time.Time) error
	GetPresence(ctx context.Context, ws, party string) (holds.Presence, error)
	SetQuiet(ctx context.Context, ws string, q holds.Quiet) error
	QuietRecords(ctx context.Context, ws string, now time.Time) ([]holds.Quiet, error)
}

// holdReleaser lifts quiet with its digest and schedules the ends of
// quiet and PAUSED (package workers/tasks).
type holdReleaser interface {
	LiftQuiet(ctx context.Context, ws, scope string) ([]holds.Digest, bool, error)
	ScheduleQuietEnd(ctx context.Context, ws, scope string, until time.Time) error
	Schedule(ctx context.Context, ws, party, reason string, at time.Time) error
}

// maxQuietForOthers bounds the until of quiet set for another party or all.
const maxQuietForOthers = 24 * time.Hour

func (s *Server) holdRoutes(v1 *gin.RouterGroup) {
	if s.deps.Holds == nil {
		return
	}
	v1.PUT("/presence", s.requireScope("inbox"), s.putPresence)
	v1.GET("/presence", s.requireScope("inbox"), s.getPresence)
	if s.deps.Releaser == nil {
		return
	}
	v1.PUT("/quiet", s.putQuiet)
	v1.GET("/quiet", s.requireScope("inbox"), s.getQuiet)
	v1.DELETE("/quiet", s.deleteQuiet)
}

type presenceView struct {
	Party         string     `json:"party"`
	Attended      bool       `json:"attended"`
	AttendedUntil *time.Time `json:"attended_until,omitempty"`
	Paused        bool       `json:"paused"`
	PausedUntil   *time.Time `json:"paused_until,omitempty"`
	Reason        string     `json:"reason,omitempty"`
}

func viewPresence(party string, p holds.Presence, now time.Time) presenceView {
	v := presenceView{Party: party, Attended: p.Attended(now), Paused: p.Paused(now), Reason: p.Reason}
	if v.Attended {
		t := p.AttendedUntil.UTC()
		v.AttendedUntil = &t
	}
	if v.Paused {
		t := p.PausedUntil.UTC()
		v.PausedUntil = &t
	}
	return v
}

// putPresence is PUT /v1/presence {"attended", "for", "paused_until", "reason"}.
func (s *Server) putPresence(c *gin.Context) {
	claims := claimsOf(c)
	ws, party := claims.Workspace, string(claims.Party())
	body, release := s.readBody(c, 16<<10)
	if body == nil {
		return
	}
	defer release()
	var req struct {
		Attended    bool       `json:"attended"`
		For         string     `json:"for"`
		PausedUntil *time.Time `json:"paused_until"`
		Reason      string     `json:"reason"`
	}
	if err := strictJSON(body, &req); err != nil {
		abort(c, newProblem(http.StatusBadRequest, "malformed", `body must be {"attended": bool, "for": "30m", "paused_until": RFC 3339, "reason": "…"}: `+err.Error()))
		return
	}
	now := s.cfg.Now()
	ttl := s.cfg.PresenceTTL
	if req.For != "" {
		d, err := time.ParseDuration(req.For)
		if err != nil || d <= 0 || d > 24*time.Hour {
			abort(c, newProblem(http.StatusBadRequest, "malformed", `for must be a duration from 1s to 24h, such as "30m"`))
			return
		}
		ttl = d
	}
	if len(req.Reason) > 500 {
		abort(c, newProblem(http.StatusBadRequest, "malformed", "reason is at most 500 bytes"))
		return
	}
	p := holds.Presence{Reason: req.Reason, SetAt: now.UTC()}
	if req.Attended {
		p.AttendedUntil = now.Add(ttl).UTC()
	}
	if req.PausedUntil != nil {
		p.PausedUntil = req.PausedUntil.UTC()
	}
	ctx, cancel := s.commitContext(c)
	defer cancel()
	if err := s.deps.Holds.SetPresence(ctx, ws, party, p, now); err != nil {
		s.fail(c, "presence", err)
		return
	}
	if p.Paused(now) && s.deps.Releaser != nil { // its end releases what it held, as one digest
		if err := s.deps.Releaser.Schedule(ctx, ws, party, holds.ReasonPaused, p.PausedUntil); err != nil {
			s.fail(c, "presence", err)
			return
		}
	}
	c.JSON(http.StatusOK, viewPresence(party, p, now))
}

// getPresence is GET /v1/presence.
func (s *Server) getPresence(c *gin.Context) {
	claims := claimsOf(c)
	p, err := s.deps.Holds.GetPresence(c.Request.Context(), claims.Workspace, string(claims.Party()))
	if err != nil {
		s.fail(c, "presence", err)
		return
	}
	c.JSON(http.StatusOK, viewPresence(string(claims.Party()), p, s.cfg.Now()))
}

// quietScope resolves and authorizes a quiet scope (docs/design.md §6, §10):
// "self" (or the caller's own party) needs the inbox scope; another party
// or "all" needs admin or a human: caller. others reports the latter.
func (s *Server) quietScope(c *gin.Context, scope string) (resolved string, others bool, p *problem) {
	claims := claimsOf(c)
	me := string(claims.Party())
	switch {
	case scope == "self" || scope == me:
		if !claims.Has("inbox") {
			return "", false, newProblem(http.StatusForbidden, "forbidden", "token lacks scope inbox")
		}
		return me, false, nil
	case scope == holds.ScopeAll:
	case scope == "":
		return "", false, newProblem(http.StatusBadRequest, "malformed", `scope must be "self", "all" or a party`)
	default:
		if _, err := event.ParseParty(scope); err != nil {
			return "", false, newProblem(http.StatusBadRequest, "malformed", `scope must be "self", "all" or a party: `+err.Error())
		}
	}
	if !claims.Has("admin") && !strings.HasPrefix(me, "human:") {
		return "", true, newProblem(http.StatusForbidden, "forbidden", "quiet for another party or all needs the admin scope or a human: caller")
	}
	return scope, true, nil
}

// putQuiet is PUT /v1/quiet {"scope", "reason", "until"}.
func (s *Server) putQuiet(c *gin.Context) {
	body, release := s.readBody(c, 16<<10)
	if body == nil {
		return
	}
	defer release()
	var req struct {
		Scope  string     `json:"scope"`
		Reason string     `json:"reason"`
		Until  *time.Time `json:"until"`
	}
	if err := strictJSON(body, &req); err != nil {
		abort(c, newProblem(http.StatusBadRequest, "malformed", `body must be {"scope": "self"|"all"|"<party>", "reason": "…", "until": RFC 3339}: `+err.Error()))
		return
	}
	if req.Scope == "" {
		req.Scope = "self"
	}
	scope, others, p := s.quietScope(c, req.Scope)
	if p != nil {
		abort(c, p)
		return
	}
	now := s.cfg.Now()
	q := holds.Quiet{Scope: scope, Reason: req.Reason, By: string(claimsOf(c).Party()), At: now.UTC()}
	if req.Until != nil {
		if !req.Until.After(now) {
			abort(c, newProblem(http.StatusUnprocessableEntity, "invalid", "until must be in the future"))
			return
		}
		q.Until = req.Until.UTC()
	}
	if others && (q.Until.IsZero() || q.Until.Sub(now) > maxQuietForOthers) {
		abort(c, newProblem(http.StatusUnprocessableEntity, "invalid", "quiet for another party or all needs an until at most 24h away"))
		return
	}
	if len(req.Reason) > 500 {
		abort(c, newProblem(http.StatusBadRequest, "malformed", "reason is at most 500 bytes"))
		return
	}
	ws := claimsOf(c).Workspace
	ctx, cancel := s.commitContext(c)
	defer cancel()
	if err := s.deps.Holds.SetQuiet(ctx, ws, q); err != nil {
		s.fail(c, "quiet", err)
		return
	}
	if !q.Until.IsZero() {
		if err := s.deps.Releaser.ScheduleQuietEnd(ctx, ws, scope, q.Until); err != nil {
			s.fail(c, "quiet", err)
			return
		}
	}
	c.JSON(http.StatusOK, q)
}

// getQuiet is GET /v1/quiet: the workspace's live quiet records.
func (s *Server) getQuiet(c *gin.Context) {
	qs, err := s.deps.Holds.QuietRecords(c.Request.Context(), claimsOf(c).Workspace, s.cfg.Now())
	if err != nil {
		s.fail(c, "quiet", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"quiet": qs})
}

// deleteQuiet is DELETE /v1/quiet?scope=: lifts it and answers with the
// digest of what it held (one per recipient it released).
func (s *Server) deleteQuiet(c *gin.Context) {
	scope := c.Query("scope")
	if scope == "" {
		scope = "self"
	}
	scope, _, p := s.quietScope(c, scope)
	if p != nil {
		abort(c, p)
		return
	}
	digests, ok, err := s.deps.Releaser.LiftQuiet(c.Request.Context(), claimsOf(c).Workspace, scope)
	if err != nil {
		s.fail(c, "quiet", err)
		return
	}
	if !ok && len(digests) == 0 {
		abort(c, newProblem(http.StatusNotFound, "not-found", "no quiet for scope "+scope))
		return
	}
	c.JSON(http.StatusOK, gin.H{"scope": scope, "digests": digests})
}
