package gateway

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/providers/event"
)

// Subscriptions (docs/design.md §6).

// createdSubscription is the answer to a create: the subscription, and
// closed when it was "until: subject_terminal" on a subject that had
// already ended (its terminal event was delivered and it is gone).
type createdSubscription struct {
	subscriptions.Subscription
	Closed bool `json:"closed,omitempty"`
}

// createSubscription is POST /v1/subscriptions: the caller's party owns
// it, in the token's workspace. DeathWatch: each exact subject that has
// already ended has its terminal event delivered to the owner at once.
func (s *Server) createSubscription(c *gin.Context) {
	claims := claimsOf(c)
	body, release := s.readBody(c, maxSmallBody)
	if body == nil {
		return
	}
	defer release()
	sub, err := subscriptions.Parse(body)
	if err != nil {
		s.fail(c, "subscription", err)
		return
	}
	sub.Workspace, sub.Owner = claims.Workspace, string(claims.Party())
	s.githubBaseline(c.Request.Context(), sub.Workspace, sub.Subjects)
	ctx, cancel := s.commitContext(c)
	defer cancel()
	now := s.cfg.Now()
	created, err := s.deps.Subs.CreateWatching(ctx, sub, now, s.deps.Journal.TerminalOf)
	if err == nil {
		err = s.deliverEnded(ctx, created, now)
	}
	if err != nil {
		if created.ID != "" && !created.Closed {
			// Nothing half-applied: the client retries a whole create.
			dctx, dcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
			if derr := s.deps.Subs.Delete(dctx, created.Workspace, created.Owner, created.ID); derr != nil {
				s.log.Error("undo subscription", "id", created.ID, "err", derr)
			}
			dcancel()
		}
		s.fail(c, "subscription", err)
		return
	}
	c.JSON(http.StatusCreated, createdSubscription{created.Subscription, created.Closed})
}

// deliverEnded delivers to the owner the terminal event of every subject
// of a new subscription that had already ended and that the subscription
// matches, as the router would have (via subscription; a waiter when the
// owner is the session the event is about). Deliveries are deduplicated
// on the event, so a retry, or the router delivering it too, adds nothing.
func (s *Server) deliverEnded(ctx context.Context, created subscriptions.Created, now time.Time) error {
	if len(created.Ended) == 0 {
		return nil
	}
	ws := created.Workspace
	snapshot, err := s.settingsSnapshot(ctx, ws)
	if err != nil {
		return err
	}
	for _, end := range created.Ended {
		e, err := s.terminalEvent(ctx, ws, end)
		if err != nil || e == nil {
			return err
		}
		var labels []string
		if e.SessionID != "" && len(created.Labels) > 0 {
			rec, err := s.deps.Sessions.Get(ctx, ws, event.SessionSubject(e.SessionID), now)
			if err != nil {
				return err
			}
			labels = rec.Labels
		}
		if !created.Matches(e, labels, now) {
			continue
		}
		if _, err := s.deps.Inbox.Deliver(ctx, inbox.Delivery{Workspace: ws, Party: created.Owner, Event: e,
			Via: inbox.ViaSubscription, Mode: created.Delivery, Waiter: created.Owner == "session:"+e.SessionID,
			Settings: snapshot}, now); err != nil {
			return err
		}
	}
	return nil
}

// terminalEvent is the journaled terminal event of an ended subject, or,
// once the journal no longer retains it, a compact event synthesized from
// the subject's terminal record.
func (s *Server) terminalEvent(ctx context.Context, ws string, end subscriptions.Ended) (*event.Event, error) {
	t := end.Terminal
	e, err := s.deps.Journal.Get(ctx, t.Seq)
	if err != nil && !errors.Is(err, journal.ErrBadCursor) {
		return nil, err
	}
	if e != nil {
		return e, nil
	}
	if !event.ValidType(t.Type) {
		return nil, errors.New("terminal record of " + end.Subject + " has no valid type")
	}
	at, _ := time.Parse(time.RFC3339Nano, t.Time)
	e = &event.Event{SpecVersion: event.SpecVersion, ID: "terminal/" + end.Subject, Source: event.ServerSource(ws),
		Type: t.Type, Subject: end.Subject, Time: at.UTC(), Seq: t.Seq, Workspace: ws,
		Priority: event.DefaultPriority(t.Type, nil), Terminal: true, Summary: t.Summary}
	if id, ok := strings.CutPrefix(end.Subject, "session:"); ok {
		e.SessionID = id
	}
	return e, nil
}

// listSubscriptions is GET /v1/subscriptions?after=&limit=: a page of the
// caller's live ones, oldest first, and the cursor of the next ("" at the
// end).
func (s *Server) listSubscriptions(c *gin.Context) {
	claims := claimsOf(c)
	limit, p := intParam(c, "limit", 100, 1, 1000)
	if p != nil {
		abort(c, p)
		return
	}
	subs, next, err := s.deps.Subs.Page(c.Request.Context(), claims.Workspace, string(claims.Party()), c.Query("after"), limit)
	if err != nil {
		s.fail(c, "subscription", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"subscriptions": subs, "next": next})
}

// deleteSubscription is DELETE /v1/subscriptions/{id}: 404 unless it is
// the caller's.
func (s *Server) deleteSubscription(c *gin.Context) {
	claims := claimsOf(c)
	if err := s.deps.Subs.Delete(c.Request.Context(), claims.Workspace, string(claims.Party()), c.Param("id")); err != nil {
		s.fail(c, "subscription", err)
		return
	}
	c.Status(http.StatusNoContent)
}
