package gateway

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
)

// Supervision, messages and workspace settings (docs/design.md §6).

// maxSmallBody bounds the JSON bodies of the supervision routes.
const maxSmallBody = 64 << 10

// maxMessageText bounds a message's text.
const maxMessageText = 16 << 10

// leaseLostType is the attention entry a displaced controller gets. It is
// delivered directly, never journaled, so it is not in the vocabulary: its
// priority is set on the event.
const leaseLostType = "supervision.lease_lost"

// sessionParam is the :id of a /v1/sessions route; on a bad id it has
// answered 400.
func sessionParam(c *gin.Context) (string, bool) {
	id := c.Param("id")
	if !event.ValidID(id) {
		abort(c, sessionIDProblem())
		return "", false
	}
	return id, true
}

// sessionIDProblem answers a session id event.ValidID refuses.
func sessionIDProblem() *problem {
	return newProblem(http.StatusBadRequest, "malformed", "session id must match ^[A-Za-z0-9._-]{1,128}$")
}

// jsonBody reads a small JSON object into v, refusing unknown fields; on
// failure it has answered.
func (s *Server) jsonBody(c *gin.Context, v any, shape string) bool {
	body, release := s.readBody(c, maxSmallBody)
	if body == nil {
		return false
	}
	defer release()
	if err := strictJSON(body, v); err != nil {
		abort(c, newProblem(http.StatusBadRequest, "malformed", "body must be "+shape+": "+strings.TrimPrefix(err.Error(), "json: ")))
		return false
	}
	return true
}

// dead is the supervision.DeadFunc of the gateway: a party is dead when
// the registry says so (docs/design.md §2); unknown is not dead.
func (s *Server) dead(ctx context.Context, workspace, party string) (bool, error) {
	rec, err := s.deps.Sessions.Get(ctx, workspace, party, s.cfg.Now())
	if err != nil {
		return false, err
	}
	return rec.Liveness == sessions.Dead, nil
}

// settingsSnapshot is the workspace settings an entry created now stores.
func (s *Server) settingsSnapshot(ctx context.Context, workspace string) (json.RawMessage, error) {
	st, err := s.deps.Sup.Settings(ctx, workspace)
	if err != nil {
		return nil, err
	}
	return json.Marshal(st)
}

// supervise is POST /v1/sessions/{id}/supervise.
func (s *Server) supervise(c *gin.Context) {
	claims := claimsOf(c)
	id, ok := sessionParam(c)
	if !ok {
		return
	}
	var req struct {
		Role     string `json:"role"`
		Scope    string `json:"scope"`
		Takeover bool   `json:"takeover"`
	}
	if !s.jsonBody(c, &req, `{"role": "controller"|"observer", "scope": "self"|"subtree", "takeover": bool}`) {
		return
	}
	ctx, cancel := s.commitContext(c)
	defer cancel()
	may := false
	if req.Takeover {
		var err error
		if may, err = s.mayTakeOver(ctx, claims, id); err != nil {
			s.fail(c, "supervise", err)
			return
		}
	}
	caller, now := string(claims.Party()), s.cfg.Now()
	edge, prev, err := s.deps.Sup.Supervise(ctx, claims.Workspace, id, caller, req.Role, req.Scope, req.Takeover, may, now)
	if err != nil {
		s.fail(c, "supervise", err)
		return
	}
	if prev != "" {
		if err := s.tellDisplaced(ctx, claims.Workspace, edge, prev, now); err != nil {
			s.fail(c, "lease lost notice", err)
			return
		}
	}
	c.JSON(http.StatusOK, edge)
}

// mayTakeOver: an ancestor of the session, a human: caller, or admin
// (docs/design.md §6). Ancestry comes from the registry, never from the client.
func (s *Server) mayTakeOver(ctx context.Context, claims *agent.Claims, session string) (bool, error) {
	if claims.Has("admin") || strings.HasPrefix(string(claims.Party()), "human:") {
		return true, nil
	}
	rec, err := s.deps.Sessions.Get(ctx, claims.Workspace, event.SessionSubject(session), s.cfg.Now())
	if err != nil {
		return false, err
	}
	return slices.Contains(rec.Lineage, claims.Party().Session()), nil
}

// tellDisplaced delivers the "you are no longer driving <id>" entry to
// the holder a takeover displaced. Its id names the new epoch, so a retry
// delivers it once.
func (s *Server) tellDisplaced(ctx context.Context, workspace string, edge supervision.Edge, prev string, now time.Time) error {
	data, _ := json.Marshal(map[string]any{"session_id": edge.Session, "holder": edge.Holder, "epoch": edge.Epoch, "previous": prev})
	e := &event.Event{SpecVersion: event.SpecVersion, ID: fmt.Sprintf("takeover/%s/%d", edge.Session, edge.Epoch),
		Source: event.ServerSource(workspace), Type: leaseLostType, Subject: event.SessionSubject(edge.Session),
		Time: now.UTC(), DataContentType: "application/json", Workspace: workspace, SessionID: edge.Session,
		Priority: event.Attention, CoalesceKey: "lease_lost:" + edge.Session,
		Summary: fmt.Sprintf("you are no longer driving %s (taken over by %s)", edge.Session, edge.Holder), Data: data}
	snapshot, err := s.settingsSnapshot(ctx, workspace)
	if err != nil {
		return err
	}
	_, err = s.deps.Inbox.Deliver(ctx, inbox.Delivery{Workspace: workspace, Party: prev, Event: e,
		Via: inbox.ViaTakeover, Settings: snapshot}, now)
	return err
}

// release is DELETE /v1/sessions/{id}/supervise?role=controller|observer
// (default controller).
func (s *Server) release(c *gin.Context) {
	claims := claimsOf(c)
	id, ok := sessionParam(c)
	if !ok {
		return
	}
	role := c.DefaultQuery("role", supervision.Controller)
	if err := s.deps.Sup.Release(c.Request.Context(), claims.Workspace, id, string(claims.Party()), role); err != nil {
		s.fail(c, "release", err)
		return
	}
	c.Status(http.StatusNoContent)
}

// supervision is GET /v1/sessions/{id}/supervision: the session's own
// edges, the subtree edges it inherits from its ancestors, and its
// effective controller resolved as the router resolves it.
func (s *Server) supervision(c *gin.Context) {
	claims := claimsOf(c)
	id, ok := sessionParam(c)
	if !ok {
		return
	}
	ctx, ws := c.Request.Context(), claims.Workspace
	rec, err := s.deps.Sessions.Get(ctx, ws, event.SessionSubject(id), s.cfg.Now())
	if err != nil {
		s.fail(c, "supervision", err)
		return
	}
	chain := append([]string{id}, rec.Lineage...)
	edges, err := s.deps.Sup.EdgesFor(ctx, ws, chain)
	if err != nil {
		s.fail(c, "supervision", err)
		return
	}
	settings, err := s.deps.Sup.Settings(ctx, ws)
	if err != nil {
		s.fail(c, "supervision", err)
		return
	}
	resolved, err := supervision.EffectiveController(ctx, ws, chain, edges, settings.DefaultController, s.dead)
	if err != nil {
		s.fail(c, "supervision", err)
		return
	}
	own, inherited := []supervision.Edge{}, []supervision.Edge{}
	for _, e := range supervision.Applicable(chain, edges) {
		if e.Session == id {
			own = append(own, e)
		} else {
			inherited = append(inherited, e)
		}
	}
	c.JSON(http.StatusOK, gin.H{"session_id": id, "edges": own, "inherited": inherited, "effective_controller": resolved})
}

// message is the body of POST /v1/sessions/{id}/messages.
type message struct {
	Text    string `json:"text"`
	Intent  string `json:"intent"` // control | info
	Blocker bool   `json:"blocker"`
}

// sendMessage is POST /v1/sessions/{id}/messages: it journals message.sent
// about the target, which the router delivers to the target and its
// observers, under the workspace's lease mode.
func (s *Server) sendMessage(c *gin.Context) {
	claims := claimsOf(c)
	id, ok := sessionParam(c)
	if !ok {
		return
	}
	var m message
	if !s.jsonBody(c, &m, `{"text", "intent": "control"|"info", "blocker"?}`) {
		return
	}
	sender := string(claims.Party())
	if p := checkMessage(m, sender, id); p != nil {
		abort(c, p)
		return
	}
	now := s.cfg.Now()
	if !s.allow(c, claims.Workspace, tokenKey(claims), 1) {
		return
	}
	ctx, cancel := s.commitContext(c)
	defer cancel()
	holder, flagged, p, err := s.leaseCheck(ctx, claims.Workspace, id, sender, m.Intent)
	if err != nil {
		s.fail(c, "message", err)
		return
	}
	if p != nil {
		abort(c, p)
		return
	}
	e := messageEvent(claims.Workspace, id, sender, m, holder, flagged, now)
	res, err := s.deps.Ingest.CommitEvents(ctx, claims.Workspace, sender, []ingest.Item{{Event: e, Journal: true}}, now)
	if err != nil {
		s.fail(c, "message", err)
		return
	}
	out := gin.H{"id": res[0].ID, "seq": res[0].Seq}
	if flagged {
		out["warning"], out["holder"] = "not_controller", holder
	}
	c.JSON(http.StatusAccepted, out)
}

func checkMessage(m message, sender, target string) *problem {
	switch {
	case strings.TrimSpace(m.Text) == "":
		return newProblem(http.StatusBadRequest, "malformed", "text is required")
	case len(m.Text) > maxMessageText:
		return newProblem(http.StatusBadRequest, "malformed", fmt.Sprintf("text is over %d bytes", maxMessageText))
	case m.Intent != "control" && m.Intent != "info":
		return newProblem(http.StatusBadRequest, "malformed", `intent must be "control" or "info"`)
	case sender == event.SessionSubject(target):
		return newProblem(http.StatusBadRequest, "malformed", "a session cannot message itself")
	}
	return nil
}

// leaseCheck applies the lease mode to a control message from a party
// that does not hold the target's controller lease: warn flags it, enforce
// refuses it (403 not_controller naming the holder). Info messages, and
// lease mode off, pass unchecked.
func (s *Server) leaseCheck(ctx context.Context, workspace, session, sender, intent string) (holder string, flagged bool, p *problem, err error) {
	if intent != "control" {
		return "", false, nil, nil
	}
	settings, err := s.deps.Sup.Settings(ctx, workspace)
	if err != nil || settings.LeaseMode == supervision.LeaseOff {
		return "", false, nil, err
	}
	edges, err := s.deps.Sup.Get(ctx, workspace, session)
	if err != nil {
		return "", false, nil, err
	}
	if len(edges) > 0 && edges[0].Role == supervision.Controller {
		holder = edges[0].Holder
	}
	switch {
	case holder == sender:
		return holder, false, nil, nil
	case settings.LeaseMode == supervision.LeaseWarn:
		return holder, true, nil, nil
	}
	detail := fmt.Sprintf("lease mode is enforce: only the controller of %s sends it control messages, and %s holds the lease", session, holder)
	if holder == "" {
		detail = fmt.Sprintf("lease mode is enforce: nobody holds the controller lease of %s; take it first", session)
	}
	p = newProblem(http.StatusForbidden, "not_controller", detail)
	p.Holder = holder
	return holder, false, p, nil
}

// messageEvent is the message.sent event of a message: about the target,
// from the sender (data.source), its own entry in every inbox.
func messageEvent(workspace, target, sender string, m message, holder string, flagged bool, now time.Time) *event.Event {
	var b [16]byte
	_, _ = rand.Read(b[:])
	id := hex.EncodeToString(b[:])
	d := map[string]any{"text": m.Text, "intent": m.Intent, "source": sender, "blocker": m.Blocker}
	if flagged {
		d["flag"], d["holder"] = "not_controller", holder
	}
	data, _ := json.Marshal(d)
	summary, _, _ := strings.Cut(m.Text, "\n")
	if r := []rune(summary); len(r) > 120 {
		summary = string(r[:120]) + "…"
	}
	return &event.Event{SpecVersion: event.SpecVersion, ID: id, Source: event.AgentSource(workspace, sender),
		Type: event.TypeMessageSent, Subject: event.SessionSubject(target), Time: now.UTC(), DataContentType: "application/json",
		Workspace: workspace, SessionID: target, Priority: event.DefaultPriority(event.TypeMessageSent, data),
		CoalesceKey: "message:" + sender + ":" + id, Summary: fmt.Sprintf("%s (%s): %s", sender, m.Intent, summary), Data: data}
}

// getWorkspaceSupervision is GET /v1/workspace/supervision.
func (s *Server) getWorkspaceSupervision(c *gin.Context) {
	st, err := s.deps.Sup.Settings(c.Request.Context(), claimsOf(c).Workspace)
	if err != nil {
		s.fail(c, "settings", err)
		return
	}
	c.JSON(http.StatusOK, st)
}

// putWorkspaceSupervision is PUT /v1/workspace/supervision: a merge patch
// of the settings, validated as a whole; a refused one applies nothing.
func (s *Server) putWorkspaceSupervision(c *gin.Context) {
	body, release := s.readBody(c, maxSmallBody)
	if body == nil {
		return
	}
	defer release()
	st, err := s.deps.Sup.MergeSettings(c.Request.Context(), claimsOf(c).Workspace, body)
	if err != nil {
		s.fail(c, "settings", err)
		return
	}
	c.JSON(http.StatusOK, st)
}
