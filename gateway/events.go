package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
)

// maxPushBody bounds an agent push: 100 events of a few KB each.
const maxPushBody = 1 << 20

// pushEvents is POST /v1/events (docs/design.md §4).
func (s *Server) pushEvents(c *gin.Context) {
	claims := claimsOf(c)
	mt := mediaType(c)
	bin := agent.IsBinary(c.Request.Header, mt)
	if !bin {
		switch mt {
		case "application/json", "application/cloudevents+json", "application/cloudevents-batch+json":
		default:
			abort(c, newProblem(http.StatusUnsupportedMediaType, "unsupported-media",
				"content type must be application/cloudevents+json, application/cloudevents-batch+json or application/json (structured mode), or the request must carry a ce-specversion header (binary mode, Content-Type the data's)"))
			return
		}
	}
	body, release := s.readBody(c, maxPushBody)
	if body == nil {
		return
	}
	defer release()
	var raw []json.RawMessage
	var err error
	if bin {
		var one json.RawMessage
		if one, err = agent.FromBinary(c.Request.Header, body); err == nil {
			raw = []json.RawMessage{one}
		}
	} else {
		raw, _, err = agent.Decode(body)
	}
	if err != nil {
		status, typ := http.StatusBadRequest, "malformed"
		switch {
		case errors.Is(err, agent.ErrTooMany):
			status, typ = http.StatusRequestEntityTooLarge, "too-large"
		case errors.Is(err, agent.ErrInvalid): // data nesting too deep
			status, typ = http.StatusUnprocessableEntity, "invalid-events"
		}
		abort(c, newProblem(status, typ, err.Error()+structuredHint(c, bin, mt)))
		return
	}
	if len(raw) == 0 { // an empty batch: valid, nothing to accept
		c.JSON(http.StatusAccepted, gin.H{"accepted": []any{}, "duplicates": []string{}})
		return
	}
	now := s.cfg.Now()
	if !s.allow(c, claims.Workspace, tokenKey(claims), len(raw)) {
		return
	}
	var prepared []*agent.Prepared
	var errs []*agent.EventError
	if bin {
		prepared, errs = agent.PrepareBinary(claims, raw[0], now)
	} else {
		prepared, errs = agent.Prepare(claims, raw, now)
	}
	if len(errs) > 0 {
		s.metrics.pushed.WithLabelValues("refused").Add(float64(len(raw)))
		p := eventsProblem(errs)
		p.Detail += structuredHint(c, bin, mt)
		abort(c, p)
		return
	}
	ctx, cancel := s.commitContext(c)
	defer cancel()
	items, p := s.resolve(ctx, c, claims, prepared, now)
	if p != nil {
		abort(c, p)
		return
	}
	results, err := s.deps.Ingest.CommitEvents(ctx, claims.Workspace, string(claims.Party()), items, now)
	if err != nil {
		s.fail(c, "events", err)
		return
	}
	type accepted struct {
		ID  string `json:"id"`
		Seq string `json:"seq,omitempty"`
	}
	out := struct {
		Accepted   []accepted `json:"accepted"`
		Duplicates []string   `json:"duplicates"`
	}{Accepted: []accepted{}, Duplicates: []string{}}
	for _, r := range results {
		if r.Duplicate {
			out.Duplicates = append(out.Duplicates, r.ID)
		} else {
			out.Accepted = append(out.Accepted, accepted{r.ID, r.Seq})
		}
	}
	s.metrics.pushed.WithLabelValues("accepted").Add(float64(len(out.Accepted)))
	s.metrics.pushed.WithLabelValues("duplicate").Add(float64(len(out.Duplicates)))
	status := http.StatusAccepted
	if len(out.Accepted) == 0 && len(out.Duplicates) > 0 {
		status = http.StatusOK
	}
	c.JSON(status, out)
}

// structuredHint explains a refused structured-mode request that also
// carries ce-* headers: its Content-Type made it structured, so the event
// was read from the body and the headers were not.
func structuredHint(c *gin.Context, bin bool, mt string) string {
	if bin || c.GetHeader("Ce-Specversion") == "" {
		return ""
	}
	return fmt.Sprintf(" (Content-Type %s makes this a structured-mode request: the event is the JSON body and ce-* headers are not read; for binary mode send the data's own Content-Type)", mt)
}

// tokenKey names a token for its rate limit: its id, else its party and
// issue time.
func tokenKey(c *agent.Claims) string {
	if c.ID != "" {
		return c.Workspace + "\x00" + c.ID
	}
	k := c.Workspace + "\x00" + c.Subject
	if c.IssuedAt != nil {
		k += "\x00" + strconv.FormatInt(c.IssuedAt.Unix(), 10)
	}
	return k
}

// resolve is the ingest's resolution before the commit (lineage, PR
// claims; ingest.Resolver) answered in HTTP: nil items and the problem
// when the push is refused or a store failed (logged, counted by failed).
func (s *Server) resolve(ctx context.Context, gc *gin.Context, claims *agent.Claims, prepared []*agent.Prepared, now time.Time) ([]ingest.Item, *problem) {
	items, refused, err := s.resolver.Resolve(ctx, claims.Workspace, prepared, now)
	var step *ingest.StepError
	var linked *ingest.LinkedError
	switch {
	case errors.As(err, &step):
		return nil, s.failed(gc, step.Step, step.Err)
	case errors.As(err, &linked):
		return nil, linkConflict(linked)
	case err != nil:
		return nil, s.failed(gc, "events", err)
	case len(refused) > 0:
		return nil, eventsProblem(refused)
	}
	return items, nil
}

// linkConflict answers a claim on a PR another session holds; the holder
// is named when it is of the same workspace.
func linkConflict(e *ingest.LinkedError) *problem {
	p := newProblem(http.StatusConflict, "conflict", e.Error())
	if e.Holder != "" {
		p.Holder = "session:" + e.Holder
	}
	return p
}

// eventsProblem answers a refused push: 403 when any event is not the
// token's to push, else 422; every event's error is listed.
func eventsProblem(errs []*agent.EventError) *problem {
	status, typ := http.StatusUnprocessableEntity, "invalid-events"
	for _, e := range errs {
		if errors.Is(e, agent.ErrForbidden) {
			status, typ = http.StatusForbidden, "forbidden"
		}
	}
	p := newProblem(status, typ, fmt.Sprintf("%d event(s) refused; nothing was committed", len(errs)))
	p.Errors = errs
	return p
}

func mediaType(c *gin.Context) string {
	mt, _, _ := strings.Cut(c.GetHeader("Content-Type"), ";")
	return strings.ToLower(strings.TrimSpace(mt))
}

// readEvents is GET /v1/events: a page of the journal after a cursor,
// long-polling up to wait when there is nothing yet.
func (s *Server) readEvents(c *gin.Context) {
	claims := claimsOf(c)
	cfg := s.deps.Journal.Config()
	cursor, err := journal.ParseCursor(c.Query("after"), cfg.Shards)
	if err != nil {
		abort(c, newProblem(http.StatusBadRequest, "malformed", "after is not a cursor this journal issued"))
		return
	}
	limit, p := intParam(c, "limit", 100, 1, 1000)
	if p != nil {
		abort(c, p)
		return
	}
	wait, p := waitParam(c)
	if p != nil {
		abort(c, p)
		return
	}
	f := journal.Filter{Workspace: claims.Workspace, Types: splitList(c.Query("types")), Subjects: splitList(c.Query("subjects"))}
	for _, t := range f.Types {
		if !event.ValidType(strings.TrimSuffix(t, ".*")) && !event.ValidType(strings.TrimSuffix(t, ".*")+".x") {
			abort(c, newProblem(http.StatusBadRequest, "malformed", fmt.Sprintf("types: %q is not a type or prefix.*", t)))
			return
		}
	}
	if !claims.Has("events:read:any") {
		allow, p := s.readScope(c, claims)
		if p != nil {
			abort(c, p)
			return
		}
		f.Allow = allow
	}
	deadline := time.Now().Add(wait)
	for {
		// Register before reading so an append between the read and the
		// wait still wakes this poll.
		woken, stop := s.notifier.wait(claims.Workspace)
		evs, next, err := s.deps.Journal.Read(c.Request.Context(), cursor, f, limit)
		if err != nil {
			stop()
			s.fail(c, "read", err)
			return
		}
		remaining := time.Until(deadline)
		if len(evs) > 0 || remaining <= 0 || s.isStopping() {
			stop()
			if evs == nil {
				evs = []*event.Event{}
			}
			c.JSON(http.StatusOK, gin.H{"events": evs, "next": next.String()})
			return
		}
		cursor = next
		timer := time.NewTimer(remaining)
		select {
		case <-woken:
		case <-timer.C:
		case <-s.stopping:
		case <-c.Request.Context().Done():
		}
		timer.Stop()
		stop()
		if c.Request.Context().Err() != nil {
			return
		}
	}
}

// readScope is what a token without events:read:any may read: its own
// subtree's sessions and what else its party is linked to. Subscriptions
// widen it once they exist.
func (s *Server) readScope(c *gin.Context, claims *agent.Claims) (func(*event.Event) bool, *problem) {
	own := claims.Party().Session()
	if own == "" {
		party := string(claims.Party())
		return func(e *event.Event) bool { return e.Subject == party }, nil
	}
	return func(e *event.Event) bool {
		return e.SessionID == own || slices.Contains(e.Lineage, own)
	}, nil
}

func splitList(v string) []string {
	var out []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

func intParam(c *gin.Context, name string, def, lo, hi int) (int, *problem) {
	v := c.Query(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, newProblem(http.StatusBadRequest, "malformed", fmt.Sprintf("%s must be an integer from %d to %d", name, lo, hi))
	}
	return n, nil
}

func waitParam(c *gin.Context) (time.Duration, *problem) {
	v := c.Query("wait")
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil {
		if n, err2 := strconv.Atoi(v); err2 == nil {
			d, err = time.Duration(n)*time.Second, nil
		}
	}
	if err != nil || d < 0 || d > 60*time.Second {
		return 0, newProblem(http.StatusBadRequest, "malformed", "wait must be a duration of at most 60s")
	}
	return d, nil
}

// childToken is POST /v1/sessions/{child}/token: a token for a new child
// session, or one in the caller's own subtree; scopes a subset of the
// caller's, lifetime at most the caller's (docs/design.md §4).
func (s *Server) childToken(c *gin.Context) {
	claims := claimsOf(c)
	if s.cfg.TokenSecret == nil {
		abort(c, newProblem(http.StatusNotFound, "not-found", "minting child tokens needs WAKEGATE_JWT_HS256_SECRET"))
		return
	}
	child := c.Param("id")
	if !event.ValidID(child) {
		abort(c, newProblem(http.StatusBadRequest, "malformed", "session id must match ^[A-Za-z0-9._-]{1,128}$"))
		return
	}
	var req struct {
		Scope string `json:"scope"`
		TTL   string `json:"ttl"`
	}
	if c.Request.ContentLength != 0 {
		body, release := s.readBody(c, 64<<10)
		if body == nil {
			return
		}
		defer release()
		if err := json.Unmarshal(body, &req); err != nil {
			abort(c, newProblem(http.StatusBadRequest, "malformed", "body must be {\"scope\", \"ttl\"}"))
			return
		}
	}
	now := s.cfg.Now()
	scopes := claims.Scopes()
	if req.Scope != "" {
		scopes = strings.Fields(req.Scope)
		for _, sc := range scopes {
			if !claims.Has(sc) {
				abort(c, newProblem(http.StatusForbidden, "forbidden", "scope "+sc+" is not the caller's to give"))
				return
			}
		}
	}
	exp := claims.ExpiresAt.Time
	if req.TTL != "" {
		ttl, err := time.ParseDuration(req.TTL)
		if err != nil || ttl <= 0 {
			abort(c, newProblem(http.StatusBadRequest, "malformed", "ttl must be a positive duration"))
			return
		}
		if limit := now.Add(ttl); limit.Before(exp) {
			exp = limit
		}
	}
	ctx, cancel := s.commitContext(c)
	defer cancel()
	// The route creates a new session as the caller's child, or re-issues
	// within the caller's own subtree; it never rewrites a parent or a
	// lease (docs/design.md §4).
	res, err := s.deps.Sessions.Mint(ctx, claims.Workspace, child, claims.Party(), now)
	if errors.Is(err, sessions.ErrNotInSubtree) {
		abort(c, newProblem(http.StatusForbidden, "forbidden",
			"session "+child+" exists and is not in the caller's subtree: a token is minted for a new session or re-issued by its parent, minter or an ancestor"))
		return
	}
	if err != nil {
		s.fail(c, "parent", err)
		return
	}
	parent := res.Parent
	if res.Created && parent != "" && s.deps.Sup != nil { // the spawner controls its new child unless one is set
		if err := s.deps.Sup.SetDefaultController(ctx, claims.Workspace, child, parent); err != nil {
			s.fail(c, "parent", err)
			return
		}
	}
	cl := agent.Claims{Workspace: claims.Workspace, Scope: strings.Join(scopes, " ")}
	cl.Subject = "session:" + child
	cl.Issuer = s.cfg.TokenIssuer
	cl.ExpiresAt = jwtTime(exp)
	cl.IssuedAt = jwtTime(now)
	tok, err := agent.Mint(s.cfg.TokenSecret, cl)
	if err != nil {
		s.log.Error("mint child token", "err", err)
		abort(c, newProblem(http.StatusInternalServerError, "internal", "could not mint a token"))
		return
	}
	c.JSON(http.StatusOK, gin.H{"token": tok, "sub": cl.Subject, "workspace": cl.Workspace,
		"scope": cl.Scope, "expires_at": exp.UTC().Format(time.RFC3339), "parent": parent})
}
