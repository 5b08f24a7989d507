package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/providers/event"
)

// endpointStore keeps the push endpoints (package delivery/outbound).
type endpointStore interface {
	Put(ctx context.Context, workspace, party string, p outbound.Put) (ep outbound.Endpoint, created, showSecret bool, err error)
	Get(ctx context.Context, workspace, party string) (*outbound.Endpoint, error)
	Delete(ctx context.Context, workspace, party string) (bool, error)
}

// deadLetters lists and redelivers pushes that never got through
// (package workers/tasks).
type deadLetters interface {
	DeadLetters(ctx context.Context, limit int) ([]outbound.DeadLetter, int64, error)
	Redeliver(ctx context.Context, id string) (outbound.DeadLetter, error)
}

// endpointRoutes registers the push endpoint routes on v1 and the dead
// letter routes on admin, for the stores the gateway was given.
func (s *Server) endpointRoutes(v1, admin *gin.RouterGroup) {
	if s.deps.Endpoints != nil {
		v1.PUT("/endpoints/:party", s.putEndpoint)
		v1.GET("/endpoints/:party", s.getEndpoint)
		v1.DELETE("/endpoints/:party", s.deleteEndpoint)
	}
	if s.deps.DeadLetters != nil {
		admin.GET("/dead-letters", s.listDeadLetters)
		admin.POST("/dead-letters/:id/redeliver", s.redeliverDeadLetter)
	}
}

// endpointParty is the party of /v1/endpoints/{party} and the caller's
// workspace: a party sets its own endpoint with scope inbox, any other
// party's needs admin (docs/design.md §10).
func (s *Server) endpointParty(c *gin.Context) (workspace, party string, p *problem) {
	party = c.Param("party")
	if _, err := event.ParseParty(party); err != nil {
		return "", "", newProblem(http.StatusBadRequest, "malformed", err.Error())
	}
	claims := claimsOf(c)
	switch {
	case claims.Has("admin"):
	case party == string(claims.Party()) && claims.Has("inbox"):
	case party == string(claims.Party()):
		return "", "", newProblem(http.StatusForbidden, "forbidden", "token lacks scope inbox")
	default:
		return "", "", newProblem(http.StatusForbidden, "forbidden", "another party's endpoint needs the admin scope")
	}
	return claims.Workspace, party, nil
}

// endpointView is an endpoint as the API shows it.
type endpointView struct {
	Party          string     `json:"party"`
	URL            string     `json:"url"`
	Format         string     `json:"format"`
	Secret         string     `json:"secret"`
	CreatedAt      time.Time  `json:"created_at"`
	UpdatedAt      time.Time  `json:"updated_at"`
	Disabled       bool       `json:"disabled"`
	DisabledAt     *time.Time `json:"disabled_at,omitempty"`
	DisabledReason string     `json:"disabled_reason,omitempty"`
}

func viewEndpoint(ep outbound.Endpoint, showSecret bool) endpointView {
	v := endpointView{Party: ep.Party, URL: ep.URL, Format: ep.Format, Secret: outbound.MaskSecret(ep.Secret),
		CreatedAt: ep.CreatedAt, UpdatedAt: ep.UpdatedAt, Disabled: ep.Disabled(), DisabledReason: ep.DisabledReason}
	if showSecret {
		v.Secret = ep.Secret
	}
	if ep.Disabled() {
		at := ep.DisabledAt
		v.DisabledAt = &at
	}
	return v
}

// putEndpoint is PUT /v1/endpoints/{party} {"url", "format"?, "secret"?}:
// 201 when created, 200 when replaced. The secret is shown in full when
// it is new to the caller (created, "rotate", or set), masked otherwise.
// A PUT enables a disabled endpoint again.
func (s *Server) putEndpoint(c *gin.Context) {
	workspace, party, p := s.endpointParty(c)
	if p != nil {
		abort(c, p)
		return
	}
	body, release := s.readBody(c, 16<<10)
	if body == nil {
		return
	}
	defer release()
	var req struct {
		URL    *string `json:"url"`
		Format string  `json:"format"`
		Secret string  `json:"secret"`
	}
	if err := strictJSON(body, &req); err != nil || req.URL == nil {
		abort(c, newProblem(http.StatusBadRequest, "malformed",
			`body must be {"url": "https://…", "format"?: "standard"|"slack", "secret"?: "whsec_…"|"rotate"}`))
		return
	}
	ep, created, show, err := s.deps.Endpoints.Put(c.Request.Context(), workspace, party,
		outbound.Put{URL: *req.URL, Format: req.Format, Secret: req.Secret})
	switch {
	case errors.Is(err, outbound.ErrRefused):
		p := newProblem(http.StatusBadRequest, "endpoint-refused", err.Error())
		p.Title = "Endpoint address refused"
		abort(c, p)
		return
	case err != nil:
		s.fail(c, "endpoints", err)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
	}
	c.JSON(status, viewEndpoint(ep, show))
}

// getEndpoint is GET /v1/endpoints/{party}: the secret masked.
func (s *Server) getEndpoint(c *gin.Context) {
	workspace, party, p := s.endpointParty(c)
	if p != nil {
		abort(c, p)
		return
	}
	ep, err := s.deps.Endpoints.Get(c.Request.Context(), workspace, party)
	if err != nil {
		s.fail(c, "endpoints", err)
		return
	}
	if ep == nil {
		abort(c, newProblem(http.StatusNotFound, "not-found", party+" has no push endpoint"))
		return
	}
	c.JSON(http.StatusOK, viewEndpoint(*ep, false))
}

// deleteEndpoint is DELETE /v1/endpoints/{party}: 204, or 404 when there
// was none. Pushes already queued are dropped at send time.
func (s *Server) deleteEndpoint(c *gin.Context) {
	workspace, party, p := s.endpointParty(c)
	if p != nil {
		abort(c, p)
		return
	}
	ok, err := s.deps.Endpoints.Delete(c.Request.Context(), workspace, party)
	if err != nil {
		s.fail(c, "endpoints", err)
		return
	}
	if !ok {
		abort(c, newProblem(http.StatusNotFound, "not-found", party+" has no push endpoint"))
		return
	}
	c.Status(http.StatusNoContent)
}

// deadLetterView is a dead letter with its body as JSON.
type deadLetterView struct {
	outbound.DeadLetter
	Body json.RawMessage `json:"body"`
}

// listDeadLetters is GET /admin/dead-letters?limit= (scope operator):
// {"dead_letters": [...], "total": n}, newest first, every workspace.
func (s *Server) listDeadLetters(c *gin.Context) {
	limit, p := intParam(c, "limit", 100, 1, 1000)
	if p != nil {
		abort(c, p)
		return
	}
	ds, total, err := s.deps.DeadLetters.DeadLetters(c.Request.Context(), limit)
	if err != nil {
		s.fail(c, "dead letters", err)
		return
	}
	out := make([]deadLetterView, 0, len(ds))
	for _, d := range ds {
		v := deadLetterView{DeadLetter: d, Body: json.RawMessage(d.Body)}
		if !json.Valid(v.Body) {
			v.Body, _ = json.Marshal(d.Body)
		}
		out = append(out, v)
	}
	c.JSON(http.StatusOK, gin.H{"dead_letters": out, "total": total})
}

// redeliverDeadLetter is POST /admin/dead-letters/{id}/redeliver (scope
// operator): 202 once the push is queued again (same webhook-id and body,
// a fresh retry schedule); 404 for an unknown id; 409 when the party has
// no enabled endpoint.
func (s *Server) redeliverDeadLetter(c *gin.Context) {
	d, err := s.deps.DeadLetters.Redeliver(c.Request.Context(), c.Param("id"))
	switch {
	case errors.Is(err, outbound.ErrNotFound):
		abort(c, newProblem(http.StatusNotFound, "not-found", "no such dead letter"))
		return
	case errors.Is(err, outbound.ErrEndpointUnavailable):
		abort(c, newProblem(http.StatusConflict, "conflict", "the dead letter's party has no enabled push endpoint; PUT one first"))
		return
	case err != nil:
		s.fail(c, "dead letters", err)
		return
	}
	c.JSON(http.StatusAccepted, gin.H{"id": d.ID, "party": d.Party, "redeliveries": d.Redeliveries, "status": "queued"})
}
