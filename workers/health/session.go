package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// session evaluates one session: I1 (an effective supervisor, resolved as
// the router resolves it), I4 (its drivers of the last hour), whether it
// has stalled (busy past MaxTurn with no heartbeat: session.stalled is
// synthesized once per silence), and, once it has exited, I6 on its
// subject. It returns when its answer next changes by time alone.
func (r *run) session(ctx context.Context, subj string) (time.Time, error) {
	id := strings.TrimPrefix(subj, "session:")
	next := soonest{now: r.now}
	if !event.ValidID(id) {
		return time.Time{}, nil
	}
	rec, err := r.s.reg.Get(ctx, r.ws, subj, r.now)
	if err != nil {
		return time.Time{}, err
	}
	if err := r.coverage(ctx, subj, rec, &next); err != nil {
		return time.Time{}, err
	}
	if err := r.drivers(ctx, subj, &next); err != nil {
		return time.Time{}, err
	}
	if rec.Busy == "busy" && !rec.Exited && !rec.BusyAt.IsZero() {
		at := rec.BusyAt.Add(r.s.cfg.MaxTurn)
		switch {
		case r.now.Before(at):
			next.add(at)
		case r.repair:
			if err := r.stalled(ctx, rec); err != nil {
				return time.Time{}, err
			}
		}
	}
	switch {
	case rec.Exited:
		if r.repair {
			r.pipe.ZRem(ctx, r.s.sessionsKey(r.ws), subj)
			r.pipe.HDel(ctx, r.s.emittedKey(r.ws), subj)
		}
		if err := r.watches(ctx, subj, &next); err != nil {
			return time.Time{}, err
		}
	case rec.Liveness == sessions.Dead:
		// Silent past the TTL: nothing to check until it is journaled
		// again (the feed brings it back).
		if r.repair {
			r.pipe.ZRem(ctx, r.s.sessionsKey(r.ws), subj)
		}
		r.setFinding(ctx, "I6", subj, 0, nil)
	default:
		r.setFinding(ctx, "I6", subj, 0, nil)
		next.add(r.now.Add(r.s.cfg.Resync))
	}
	return next.at, nil
}

// i1Example is an I1 finding's example.
type i1Example struct {
	Session  string   `json:"session"`
	Liveness string   `json:"liveness"`
	Lineage  []string `json:"lineage,omitempty"`
	Resolved string   `json:"resolved"`
	Detail   string   `json:"detail"`
}

// coverage is I1: a session that is not dead has an effective supervisor
// (supervision.EffectiveController with the workspace default and the
// registry's liveness, as the router resolves it). Its answer changes by
// time alone when the session or the supervisor found falls silent past
// the TTL.
func (r *run) coverage(ctx context.Context, subj string, rec *sessions.Session, next *soonest) error {
	if rec.Liveness == sessions.Dead {
		r.setFinding(ctx, "I1", subj, 0, nil)
		return nil
	}
	horizon := func(s *sessions.Session) {
		if s.Liveness == sessions.Live && strings.HasPrefix(s.Party, "session:") {
			next.add(s.SeenAt.Add(r.s.cfg.SessionTTL))
		}
	}
	horizon(rec)
	id := strings.TrimPrefix(subj, "session:")
	chain := append([]string{id}, rec.Lineage...)
	edges, err := r.s.sup.EdgesFor(ctx, r.ws, chain)
	if err != nil {
		return err
	}
	records := map[string]*sessions.Session{}
	dead := func(ctx context.Context, ws, party string) (bool, error) {
		s, err := r.s.reg.Get(ctx, ws, party, r.now)
		if err != nil {
			return false, err
		}
		records[party] = s
		return s.Liveness == sessions.Dead, nil
	}
	res, err := supervision.EffectiveController(ctx, r.ws, chain, edges, r.settings.DefaultController, dead)
	if err != nil {
		return err
	}
	if res.Party != "" {
		if s := records[res.Party]; s != nil {
			horizon(s)
		}
		r.setFinding(ctx, "I1", subj, 0, nil)
		return nil
	}
	detail := "no controller of its own"
	if len(rec.Lineage) > 0 {
		detail += ", none inherited from an ancestor that is not dead"
	}
	if r.settings.DefaultController == "" {
		detail += ", and no workspace default controller"
	} else {
		detail += ", and the workspace default controller " + r.settings.DefaultController + " is dead"
	}
	r.setFinding(ctx, "I1", subj, 1, i1Example{Session: subj, Liveness: string(rec.Liveness), Lineage: rec.Lineage,
		Resolved: res.Resolved, Detail: detail})
	return nil
}

// driver is one party that drove a session, and when last.
type driver struct {
	Party string    `json:"party"`
	Last  time.Time `json:"last"`
}

type i4Example struct {
	Session string   `json:"session"`
	Drivers []driver `json:"drivers"`
	Detail  string   `json:"detail"`
}

// drivers is I4: the parties that prompted the session (session.prompted
// data.source) or sent it control messages (message.sent intent control,
// data.source) in the last hour, filed by the feed. Two or more is a
// finding until all but one have been quiet for an hour.
func (r *run) drivers(ctx context.Context, subj string, next *soonest) error {
	key := r.s.drvKey(r.ws, subj)
	since := r.now.Add(-window)
	zs, err := r.s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, ByScore: true,
		Start: "(" + strconv.FormatInt(since.UnixMilli(), 10), Stop: "+inf"}).Result()
	if err != nil {
		return fmt.Errorf("drivers of %s: %w", subj, err)
	}
	if r.repair {
		r.pipe.ZRemRangeByScore(ctx, key, "-inf", strconv.FormatInt(since.UnixMilli(), 10))
	}
	if len(zs) < 2 {
		r.setFinding(ctx, "I4", subj, 0, nil)
		return nil
	}
	ds := make([]driver, 0, len(zs))
	for _, z := range zs {
		p, _ := z.Member.(string)
		ds = append(ds, driver{Party: p, Last: time.UnixMilli(int64(z.Score)).UTC()})
	}
	slices.SortFunc(ds, func(a, b driver) int { return b.Last.Compare(a.Last) })
	// Fewer than two are left once the second most recent has aged out.
	next.add(ds[1].Last.Add(window))
	r.setFinding(ctx, "I4", subj, 1, i4Example{Session: subj, Drivers: ds,
		Detail: fmt.Sprintf("driven by %d parties in the last hour", len(ds))})
	return nil
}

// stalled journals session.stalled about a session busy past MaxTurn with
// no heartbeat, once per silence: its fact id names the session and the
// time of its last sign of work (turn start or heartbeat), so a re-run or
// a second sweeper journals nothing twice, and a session that works again
// and then falls silent again stalls again. The router delivers it like
// any event (a paused session's alarm is held back there).
func (r *run) stalled(ctx context.Context, rec *sessions.Session) error {
	id := strings.TrimPrefix(rec.Party, "session:")
	busy := rec.BusyAt.UnixMilli()
	factID := "stalled/" + id + "/" + strconv.FormatInt(busy, 10)
	if done, err := r.emitted(ctx, rec.Party, factID); err != nil || done {
		return err
	}
	quiet := r.now.Sub(rec.BusyAt).Truncate(time.Second)
	data, _ := json.Marshal(map[string]any{"busy_since": rec.BusyAt, "last_seen": nullTime(rec.SeenAt),
		"max_turn": r.s.cfg.MaxTurn.String(), "liveness": rec.Liveness})
	e := &event.Event{SpecVersion: event.SpecVersion, ID: factID, Source: event.ServerSource(r.ws),
		Type: event.TypeSessionStalled, Subject: rec.Party, Time: r.now.UTC(), DataContentType: "application/json",
		Workspace: r.ws, SessionID: id, Lineage: rec.Lineage,
		Priority: event.DefaultPriority(event.TypeSessionStalled, data),
		Summary:  fmt.Sprintf("%s has been busy for %s with no heartbeat (max turn %s)", rec.Party, quiet, r.s.cfg.MaxTurn),
		Data:     data}
	return r.synthesize(ctx, e)
}

// synthesize journals a synthesized event once (its fact id is the dedup)
// and remembers it as the subject's last.
func (r *run) synthesize(ctx context.Context, e *event.Event) error {
	_, added, err := r.s.j.Append(ctx, e)
	if err != nil {
		return err
	}
	if err := r.s.rdb.HSet(ctx, r.s.emittedKey(r.ws), e.Subject, e.ID).Err(); err != nil {
		return fmt.Errorf("remember %s: %w", e.ID, err)
	}
	if added {
		r.st.Synthesized++
		r.s.m.synthesized.WithLabelValues(e.Type).Inc()
		r.s.log.Info("synthesized", "workspace", r.ws, "event_type", e.Type, "event_id", e.ID, "subject", e.Subject)
	}
	return nil
}

// emitted reports whether factID is the last fact synthesized about
// subject (the journal's own dedup marker expires with the retention).
func (r *run) emitted(ctx context.Context, subject, factID string) (bool, error) {
	last, err := r.s.rdb.HGet(ctx, r.s.emittedKey(r.ws), subject).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("last fact about %s: %w", subject, err)
	}
	return last == factID, nil
}

func nullTime(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return t
}
