package gateway

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// The brief (docs/design.md §7): what a supervisor reads after a restart or a
// compaction, from state alone.

// briefMaxUnacked bounds the unacked entries a brief reads (and sorts);
// the answer lists at most ?limit of them, and counts them all.
const briefMaxUnacked = 10 * inbox.MaxLimit

// openDecision is a session the reader controls that waits on it:
// awaiting input or a permission, not yet followed by a turn.
type openDecision struct {
	Session string    `json:"session"`
	Type    string    `json:"type"`
	Since   time.Time `json:"since,omitzero"`
}

// openSubject is a subject the reader has unacked entries about or leases,
// that has not ended, with its latest state.
type openSubject struct {
	Subject  string `json:"subject"`
	State    string `json:"state,omitempty"`    // a session's last lifecycle type
	Liveness string `json:"liveness,omitempty"` // a session's liveness
	// Latest is the reader's newest unacked entry about the subject.
	Latest *subjectEntry `json:"latest,omitempty"`

	idleAt time.Time // a session's: when it last went idle (to wait, for an open decision)
}

type subjectEntry struct {
	Seq      int64          `json:"seq"`
	Type     string         `json:"type"`
	Priority event.Priority `json:"priority"`
	Summary  string         `json:"summary,omitempty"`
	At       time.Time      `json:"at"`
}

// brief is GET /v1/brief (?party= with the operator scope, ?limit= of the
// unacked entries listed, default and at most 1000).
func (s *Server) brief(c *gin.Context) {
	ws, party, p := s.reader(c)
	if p != nil {
		abort(c, p)
		return
	}
	limit, p := intParam(c, "limit", inbox.MaxLimit, 1, inbox.MaxLimit)
	if p != nil {
		abort(c, p)
		return
	}
	ctx, now := c.Request.Context(), s.cfg.Now()
	cursor, err := s.journalEnd(ctx) // first: the reader reads on from here and misses nothing after
	if err != nil {
		s.fail(c, "brief", err)
		return
	}
	next, err := s.deps.Inbox.Last(ctx, ws, party)
	if err != nil {
		s.fail(c, "brief", err)
		return
	}
	leases, err := s.deps.Sup.HeldBy(ctx, ws, party)
	if err != nil {
		s.fail(c, "brief", err)
		return
	}
	subs, err := s.deps.Subs.List(ctx, ws, party)
	if err != nil {
		s.fail(c, "brief", err)
		return
	}
	unacked, err := s.allUnacked(ctx, ws, party)
	if err != nil {
		s.fail(c, "brief", err)
		return
	}
	decisions, subjects, err := s.openWork(ctx, ws, leases, unacked, now)
	if err != nil {
		s.fail(c, "brief", err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"party": party, "workspace": ws, "leases": leases, "subscriptions": subs,
		"unacked": unacked[:min(limit, len(unacked))], "unacked_count": len(unacked),
		"open_decisions": decisions, "open_subjects": subjects, "inbox_next": next, "cursor": cursor})
}

// allUnacked reads a party's unacked entries (up to briefMaxUnacked),
// highest priority first, then by seq.
func (s *Server) allUnacked(ctx context.Context, ws, party string) ([]inbox.Entry, error) {
	all := []inbox.Entry{}
	var after int64
	for len(all) < briefMaxUnacked {
		page, next, err := s.deps.Inbox.List(ctx, ws, party, after, true, inbox.MaxLimit)
		if err != nil {
			return nil, err
		}
		all = append(all, page...)
		if len(page) < inbox.MaxLimit {
			break
		}
		after = next
	}
	slices.SortStableFunc(all, func(a, b inbox.Entry) int {
		if d := b.Priority.Rank() - a.Priority.Rank(); d != 0 {
			return d
		}
		return int(a.Seq - b.Seq)
	})
	return all, nil
}

// openWork derives the open decisions (sessions the party holds the
// controller lease of that await input or a permission) and the open
// subjects (those of the unacked entries and the leased sessions that
// have not ended: a session not exited, another subject with no terminal
// record), sorted by subject.
func (s *Server) openWork(ctx context.Context, ws string, leases []supervision.Edge, unacked []inbox.Entry, now time.Time) ([]openDecision, []openSubject, error) {
	decisions := []openDecision{}
	seen := map[string]*openSubject{} // nil: the subject has ended
	consider := func(subject string) (*openSubject, error) {
		if o, ok := seen[subject]; ok {
			return o, nil
		}
		o, err := s.openSubject(ctx, ws, subject, now)
		seen[subject] = o
		return o, err
	}
	for _, l := range leases {
		o, err := consider(event.SessionSubject(l.Session))
		if err != nil {
			return nil, nil, err
		}
		if o != nil && (o.State == event.TypeSessionAwaitingInput || o.State == event.TypeSessionPermissionRequested) {
			decisions = append(decisions, openDecision{Session: l.Session, Type: o.State, Since: o.idleAt})
		}
	}
	for _, e := range unacked {
		if e.Subject == "" {
			continue
		}
		o, err := consider(e.Subject)
		if err != nil {
			return nil, nil, err
		}
		if o != nil && (o.Latest == nil || e.Seq > o.Latest.Seq) {
			o.Latest = &subjectEntry{Seq: e.Seq, Type: e.Type, Priority: e.Priority, Summary: e.Summary, At: e.LastAt}
		}
	}
	subjects := []openSubject{}
	for _, o := range seen {
		if o != nil {
			subjects = append(subjects, *o)
		}
	}
	slices.SortFunc(subjects, func(a, b openSubject) int { return strings.Compare(a.Subject, b.Subject) })
	return decisions, subjects, nil
}

// openSubject is a subject's open state, or nil when it has ended: a
// session that exited (a resumed one is open again), any other subject
// with a terminal record.
func (s *Server) openSubject(ctx context.Context, ws, subject string, now time.Time) (*openSubject, error) {
	if strings.HasPrefix(subject, "session:") {
		rec, err := s.deps.Sessions.Get(ctx, ws, subject, now)
		if err != nil || rec.Exited {
			return nil, err
		}
		return &openSubject{Subject: subject, State: rec.State, Liveness: string(rec.Liveness), idleAt: rec.BusyAt}, nil
	}
	t, err := s.deps.Journal.TerminalOf(ctx, ws, subject)
	if err != nil || t != nil {
		return nil, err
	}
	return &openSubject{Subject: subject}, nil
}

// journalEnd is a GET /v1/events cursor at the current end of every
// shard: reading on from it returns what is journaled after the brief.
func (s *Server) journalEnd(ctx context.Context) (string, error) {
	n := s.deps.Journal.Config().Shards
	pipe := s.deps.Redis.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, n)
	for i := range n {
		cmds[i] = pipe.XRevRangeN(ctx, s.deps.Journal.StreamKey(i), "+", "-", 1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return "", err
	}
	cur := make(journal.Cursor, n)
	for i, cmd := range cmds {
		if msgs, _ := cmd.Result(); len(msgs) > 0 {
			cur[i] = msgs[0].ID
		}
	}
	return cur.String(), nil
}
