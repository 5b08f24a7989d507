package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/providers/event"
)

// inboxFanout wakes inbox long-polls and streams of one party.
func inboxFanout(rdb redis.UniversalClient, box *inbox.Inbox, log *slog.Logger) *fanout {
	return newFanout(rdb, box.NotifyPattern(), func(ch string) (string, bool) {
		ws, party, ok := box.ParseChannel(ch)
		return waiterKey(ws, party), ok
	}, log)
}

func waiterKey(workspace, party string) string { return workspace + "\x00" + party }

// reader is whose inbox a request reads: the caller's, or with ?party= and
// the operator scope, anyone's.
func (s *Server) reader(c *gin.Context) (workspace, party string, p *problem) {
	claims := claimsOf(c)
	workspace, party = claims.Workspace, string(claims.Party())
	if other := c.Query("party"); other != "" && other != party {
		if !claims.Has("operator") {
			return "", "", newProblem(http.StatusForbidden, "forbidden", "reading another party's inbox needs the operator scope")
		}
		if _, err := event.ParseParty(other); err != nil {
			return "", "", newProblem(http.StatusBadRequest, "malformed", err.Error())
		}
		party = other
		if ws := c.Query("workspace"); ws != "" {
			if !event.ValidWorkspace(ws) {
				return "", "", newProblem(http.StatusBadRequest, "malformed", "workspace is not a valid name")
			}
			workspace = ws
		}
	}
	return workspace, party, nil
}

type inboxQuery struct {
	workspace, party string
	after            int64
	hasAfter         bool
	limit            int
	wait             time.Duration
	// minPriority, when set, is an explicit waiter's interest (docs/design.md
	// §12, `wakegate wait`): a long-poll also ends on an entry after the
	// cursor at this priority or above, whatever its update decided.
	minPriority event.Priority
}

func (s *Server) inboxQuery(c *gin.Context) (inboxQuery, *problem) {
	var q inboxQuery
	var p *problem
	if q.workspace, q.party, p = s.reader(c); p != nil {
		return q, p
	}
	if v := c.Query("after"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return q, newProblem(http.StatusBadRequest, "malformed", "after must be a seq (a non-negative integer)")
		}
		q.after, q.hasAfter = n, true
	}
	if q.limit, p = intParam(c, "limit", inbox.DefaultLimit, 1, inbox.MaxLimit); p != nil {
		return q, p
	}
	if v := c.Query("min_priority"); v != "" {
		q.minPriority = event.Priority(v)
		if q.minPriority.Rank() < 0 {
			return q, newProblem(http.StatusBadRequest, "malformed", "min_priority must be info, attention or critical")
		}
	}
	q.wait, p = waitParam(c)
	return q, p
}

// getInbox is GET /v1/inbox: the unacked entries (after a seq), waiting up
// to wait for one that decides a wake; an info fold never ends the wait.
// With min_priority the wait also ends on any entry at that priority or
// above (an explicit waiter's interest), attended or not.
func (s *Server) getInbox(c *gin.Context) {
	q, p := s.inboxQuery(c)
	if p != nil {
		abort(c, p)
		return
	}
	ctx := c.Request.Context()
	var (
		entries []inbox.Entry
		next    int64
		err     error
	)
	if q.wait > 0 {
		entries, next, err = s.longPoll(c, q)
	} else {
		entries, next, err = s.deps.Inbox.List(ctx, q.workspace, q.party, q.after, q.hasAfter, q.limit)
	}
	if err != nil {
		s.fail(c, "inbox", err)
		return
	}
	if ctx.Err() != nil {
		return
	}
	if entries == nil {
		entries = []inbox.Entry{}
	}
	c.JSON(http.StatusOK, gin.H{"entries": entries, "next": next})
}

// longPoll waits up to q.wait for an entry after the cursor that decided a
// wake and returns the page then (one round trip per look), else the page
// at the deadline.
func (s *Server) longPoll(c *gin.Context, q inboxQuery) ([]inbox.Entry, int64, error) {
	ctx := c.Request.Context()
	start := time.Now()
	deadline := start.Add(q.wait)
	defer func() {
		// An open long-poll is a sign of life too: one that waited is
		// seen again, off the answer's path.
		if time.Since(start) > time.Second {
			claims := claimsOf(c)
			go func() {
				sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
				defer cancel()
				_ = s.deps.Sessions.Seen(sctx, claims.Workspace, string(claims.Party()), s.cfg.Now())
			}()
		}
	}()
	register := s.inboxes.waitWake // only a wake answers it
	if q.minPriority != "" {
		register = s.inboxes.wait // an update may bring an entry of that priority
	}
	for {
		woken, stop := register(waiterKey(q.workspace, q.party))
		entries, next, woke, err := s.deps.Inbox.ListWoken(ctx, q.workspace, q.party, q.after, q.hasAfter, q.limit)
		if err != nil || woke {
			stop()
			return entries, next, err
		}
		if q.minPriority != "" {
			entries, next, err = s.deps.Inbox.List(ctx, q.workspace, q.party, q.after, q.hasAfter, q.limit)
			if err != nil || slices.ContainsFunc(entries, func(e inbox.Entry) bool { return e.Priority.Rank() >= q.minPriority.Rank() }) {
				stop()
				return entries, next, err
			}
		}
		remaining := time.Until(deadline)
		if remaining <= 0 || s.isStopping() {
			stop()
			return s.deps.Inbox.List(ctx, q.workspace, q.party, q.after, q.hasAfter, q.limit)
		}
		timer := time.NewTimer(remaining)
		select {
		case <-woken:
		case <-timer.C:
		case <-s.stopping:
		case <-ctx.Done():
		}
		timer.Stop()
		stop()
		if ctx.Err() != nil {
			return nil, 0, nil
		}
	}
}

// streamInbox is GET /v1/inbox/stream: the same entries as Server-Sent
// Events, one "entry" event each (id = seq), a comment every 15 s.
func (s *Server) streamInbox(c *gin.Context) {
	q, p := s.inboxQuery(c)
	if p != nil {
		abort(c, p)
		return
	}
	if v := c.GetHeader("Last-Event-ID"); v != "" && !q.hasAfter {
		if n, err := strconv.ParseInt(v, 10, 64); err == nil && n >= 0 {
			q.after, q.hasAfter = n, true
		}
	}
	ctx := c.Request.Context()
	c.Header("Content-Type", "text/event-stream")
	c.Header("Cache-Control", "no-cache")
	c.Header("X-Accel-Buffering", "no")
	c.Status(http.StatusOK)
	claims := claimsOf(c)
	keepalive := time.NewTicker(15 * time.Second)
	defer keepalive.Stop()
	for {
		woken, stop := s.inboxes.wait(waiterKey(q.workspace, q.party))
		entries, next, err := s.deps.Inbox.List(ctx, q.workspace, q.party, q.after, q.hasAfter, q.limit)
		if err != nil {
			stop()
			return
		}
		for _, e := range entries {
			b, _ := json.Marshal(e)
			fmt.Fprintf(c.Writer, "id: %d\nevent: entry\ndata: %s\n\n", e.Seq, b)
		}
		if len(entries) > 0 {
			q.after, q.hasAfter = next, true
		}
		c.Writer.Flush()
		select {
		case <-woken:
		case <-keepalive.C:
			fmt.Fprint(c.Writer, ": keepalive\n\n")
			c.Writer.Flush()
			_ = s.deps.Sessions.Seen(ctx, claims.Workspace, string(claims.Party()), s.cfg.Now())
		case <-s.stopping:
		case <-ctx.Done():
		}
		stop()
		if ctx.Err() != nil || s.isStopping() {
			return
		}
	}
}

// ackInbox is POST /v1/inbox/ack {"through_seq": N} or {"seqs": [...]}.
func (s *Server) ackInbox(c *gin.Context) {
	workspace, party, p := s.reader(c)
	if p != nil {
		abort(c, p)
		return
	}
	body, release := s.readBody(c, 64<<10)
	if body == nil {
		return
	}
	defer release()
	var req struct {
		Through *int64  `json:"through_seq"`
		Seqs    []int64 `json:"seqs"`
	}
	if err := strictJSON(body, &req); err != nil || (req.Through == nil) == (len(req.Seqs) == 0) {
		abort(c, newProblem(http.StatusBadRequest, "malformed", `body must be {"through_seq": N} or {"seqs": [N, …]}`))
		return
	}
	var through int64
	if req.Through != nil {
		through = *req.Through
		if through <= 0 {
			abort(c, newProblem(http.StatusBadRequest, "malformed", "through_seq must be positive"))
			return
		}
	}
	acked, err := s.deps.Inbox.Ack(c.Request.Context(), workspace, party, through, req.Seqs)
	switch {
	case errors.Is(err, inbox.ErrBeyondLast):
		abort(c, newProblem(http.StatusBadRequest, "malformed", "a seq is beyond the inbox's last; nothing was acked"))
		return
	case err != nil:
		s.fail(c, "ack", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"acked": acked})
}

// strictJSON decodes one JSON object, refusing unknown fields.
func strictJSON(body []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return err
	}
	if dec.More() {
		return errors.New("trailing data")
	}
	return nil
}
