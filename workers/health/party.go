package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/escalate"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// parties lists the recipients to evaluate: the active ones whose inbox
// counters (or, while a finding about them depends on it, their last
// sighting) moved since their last evaluation, the due ones, and with
// resync every active one. It returns them with their counters.
func (r *run) parties(ctx context.Context, resync bool) ([]string, []inbox.Counts, error) {
	s, ws := r.s, r.ws
	active, err := s.rdb.SMembers(ctx, s.activeKey(ws)).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("active parties: %w", err)
	}
	due, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.dueKey(ws), ByScore: true, Start: "-inf",
		Stop: strconv.FormatInt(r.now.UnixMilli(), 10), Count: maxPerPass}).Result()
	if err != nil {
		return nil, nil, fmt.Errorf("due parties: %w", err)
	}
	isDue := map[string]bool{}
	for _, m := range due {
		if p, ok := strings.CutPrefix(m, partyMember); ok {
			isDue[p] = true
		}
	}
	var valid []string
	for _, p := range active {
		if _, err := event.ParseParty(p); err == nil {
			valid = append(valid, p)
		}
	}
	for p := range isDue {
		if _, err := event.ParseParty(p); err == nil && !contains(valid, p) {
			valid = append(valid, p)
		}
	}
	counts, err := s.box.CountsOf(ctx, ws, valid)
	if err != nil {
		return nil, nil, err
	}
	stored := map[string]string{}
	if len(valid) > 0 {
		vals, err := s.rdb.HMGet(ctx, s.pverKey(ws), valid...).Result()
		if err != nil {
			return nil, nil, fmt.Errorf("party versions: %w", err)
		}
		for i, v := range vals {
			if str, ok := v.(string); ok {
				stored[valid[i]] = str
			}
		}
	}
	seen, err := r.sightings(ctx, valid, stored)
	if err != nil {
		return nil, nil, err
	}
	var out []string
	var outCounts []inbox.Counts
	for i, p := range valid {
		flag := strings.HasSuffix(stored[p], "|f")
		if !resync && !isDue[p] && stored[p] == version(counts[i], seen[p], flag) {
			continue // unchanged: no work
		}
		if len(out) == maxPerPass {
			r.st.Behind = true
			break
		}
		out = append(out, p)
		outCounts = append(outCounts, counts[i])
	}
	return out, outCounts, nil
}

// sightings reads the last sighting (ms) of the parties whose stored
// version was flagged: only a finding that a sighting resolves (I2
// unreached, I7 no reader) makes a party's sighting part of its version.
func (r *run) sightings(ctx context.Context, parties []string, stored map[string]string) (map[string]int64, error) {
	out := map[string]int64{}
	pipe := r.s.rdb.Pipeline()
	cmds := map[string]*redis.StringCmd{}
	for _, p := range parties {
		if strings.HasSuffix(stored[p], "|f") {
			cmds[p] = pipe.HGet(ctx, sessions.Key(r.s.j, r.ws, p), "seen_at")
		}
	}
	if len(cmds) == 0 {
		return out, nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("sightings: %w", err)
	}
	for p, c := range cmds {
		n, _ := strconv.ParseInt(c.Val(), 10, 64)
		out[p] = n
	}
	return out, nil
}

// version is what a party's evaluation depends on besides time: its inbox
// counters, and its last sighting (ms) while a finding depends on it
// (flag: a sighting can only resolve findings, never make one).
func version(c inbox.Counts, seenMs int64, flag bool) string {
	v := fmt.Sprintf("%d/%d/%d", c.Last, c.Unacked, c.Armed)
	if flag {
		v += "/" + strconv.FormatInt(seenMs, 10) + "|f"
	}
	return v
}

// msOf is t in ms, 0 for the zero time (as the registry stores "never").
func msOf(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// i2Entry is an I2 example: an entry past escalate_after that reached
// nobody, whose escalation check is overdue.
type i2Entry struct {
	Kind     string         `json:"kind"` // "entry"
	Party    string         `json:"party"`
	Seq      int64          `json:"seq"`
	Type     string         `json:"type"`
	Subject  string         `json:"subject"`
	Priority event.Priority `json:"priority"`
	Due      time.Time      `json:"due"`
	Reason   string         `json:"reason"` // dead | unreached | dead_letter | unacked
	Detail   string         `json:"detail"`
}

type i3Example struct {
	Party   string    `json:"party"`
	Unacked int64     `json:"unacked"`
	Oldest  time.Time `json:"oldest_update"`
}

type i5Example struct {
	Party  string `json:"party"`
	Wakes  int64  `json:"wakes_last_hour"`
	Budget int64  `json:"budget"`
	Detail string `json:"detail"`
}

type i7Example struct {
	Party    string    `json:"party"`
	Unacked  int64     `json:"unacked"`
	Oldest   time.Time `json:"oldest_update"`
	LastSeen any       `json:"last_seen"`
	Liveness string    `json:"liveness"`
	Detail   string    `json:"detail"`
}

// party evaluates one recipient: I2 (its armed entries whose escalation
// check is overdue and that reached nobody — the periodic pass schedules
// their timer again through the escalator), I3 (its unacked entries), I5
// (its wakes of the last hour against the workspace's rate) and I7
// (unacked entries and no reader seen since the oldest of them). keep is
// false when nothing is left to watch (no unacked or armed entry, no wake
// in the window); ver is the version it was evaluated at.
func (r *run) party(ctx context.Context, p string, c inbox.Counts) (next time.Time, keep bool, ver string, err error) {
	r.st.Evaluated++
	r.st.Parties++
	r.s.m.evaluations.WithLabelValues("party").Inc()
	soon := soonest{now: r.now}
	rec, err := r.s.reg.Get(ctx, r.ws, p, r.now)
	if err != nil {
		return time.Time{}, false, "", err
	}
	var ep *bool
	hasEndpoint := func() (bool, error) {
		if ep == nil {
			e, err := r.s.eps.Get(ctx, r.ws, p)
			if err != nil {
				return false, err
			}
			v := e != nil && !e.Disabled()
			ep = &v
		}
		return *ep, nil
	}
	unreached, err := r.overdue(ctx, p, c, rec, hasEndpoint, &soon)
	if err != nil {
		return time.Time{}, false, "", err
	}
	noReader := false
	if c.Unacked > 0 {
		page, _, err := r.s.box.List(ctx, r.ws, p, 0, false, 1)
		if err != nil {
			return time.Time{}, false, "", err
		}
		var oldest time.Time
		if len(page) > 0 {
			oldest = page[0].LastAt
		}
		r.setFinding(ctx, "I3", p, c.Unacked, i3Example{Party: p, Unacked: c.Unacked, Oldest: oldest})
		// No reader seen: no authenticated request since the oldest
		// pending update; a person with an endpoint acks by its 2xx.
		if !oldest.IsZero() && rec.SeenAt.Before(oldest) {
			noReader = true
			if !strings.HasPrefix(p, "session:") {
				has, err := hasEndpoint()
				if err != nil {
					return time.Time{}, false, "", err
				}
				noReader = !has
			}
		}
		if noReader {
			r.setFinding(ctx, "I7", p, 1, i7Example{Party: p, Unacked: c.Unacked, Oldest: oldest, LastSeen: nullTime(rec.SeenAt),
				Liveness: string(rec.Liveness), Detail: "no authenticated request since its oldest unacked update"})
		} else {
			r.setFinding(ctx, "I7", p, 0, nil)
		}
	} else {
		r.setFinding(ctx, "I3", p, 0, nil)
		r.setFinding(ctx, "I7", p, 0, nil)
	}
	wakes, err := r.wakes(ctx, p, &soon)
	if err != nil {
		return time.Time{}, false, "", err
	}
	keep = c.Unacked > 0 || c.Armed > 0 || wakes > 0
	return soon.at, keep, version(c, msOf(rec.SeenAt), unreached || noReader), nil
}

// overdue is I2 for one recipient: its armed entries whose check is past
// due by overdueGrace — the escalator's timer should have run — and that
// would escalate (escalate.Decide: the recipient is dead, or made no
// request since the entry and has no endpoint, or its push was
// dead-lettered). The periodic pass asks the escalator to schedule the
// recipient's timer again (it runs at once for what is due) and rechecks
// after overdueGrace. It reports whether a finding depends on the
// recipient's sighting.
func (r *run) overdue(ctx context.Context, p string, c inbox.Counts, rec *sessions.Session,
	hasEndpoint func() (bool, error), soon *soonest) (bool, error) {
	if c.Armed == 0 {
		r.setFinding(ctx, "I2", p, 0, nil)
		return false, nil
	}
	late, err := r.s.escs.Due(ctx, r.ws, p, r.now.Add(-overdueGrace), 100)
	if err != nil {
		return false, err
	}
	var found []i2Entry
	for _, d := range late {
		ent, err := r.s.box.Get(ctx, r.ws, p, d.CK)
		if err != nil {
			return false, err
		}
		if ent == nil {
			continue // acked: the escalator drops it
		}
		st := supervision.Defaults()
		if len(ent.Settings) > 0 {
			_ = json.Unmarshal(ent.Settings, &st) // the router's snapshot; a bad one reads as the defaults
		}
		has, err := hasEndpoint()
		if err != nil {
			return false, err
		}
		due := time.UnixMilli(d.Due)
		reason := escalate.Decide(escalate.Facts{Party: p, Liveness: rec.Liveness, SeenAt: rec.SeenAt,
			Since: due.Add(-time.Duration(st.EscalateAfter)), HasEndpoint: has, Priority: ent.Priority,
			EscalateUnacked: st.EscalateUnacked, DeadLettered: d.DeadLettered})
		if reason == "" {
			continue // reached: the check will say so when it runs
		}
		found = append(found, i2Entry{Kind: "entry", Party: p, Seq: ent.Seq, Type: ent.Type, Subject: ent.Subject,
			Priority: ent.Priority, Due: due.UTC(), Reason: reason,
			Detail: fmt.Sprintf("escalation check %s overdue", r.now.Sub(due).Truncate(time.Second))})
		if r.repair && r.s.esc != nil {
			r.repaired(ctx, "I2", fmt.Sprintf("rescheduled the escalation of %s entry %q due %d", p, d.CK, d.Due))
		}
	}
	if len(late) > 0 {
		if r.repair && r.s.esc != nil {
			if err := r.s.esc.Schedule(ctx, r.ws, p); err != nil {
				return false, err
			}
			if len(found) > 0 {
				r.s.log.Warn("escalation overdue: timer scheduled again", "workspace", r.ws, "party", p, "entries", len(found))
			}
		}
		soon.add(r.now.Add(overdueGrace))
	} else if at, ok, err := r.s.escs.Next(ctx, r.ws, p); err != nil {
		return false, err
	} else if ok {
		soon.add(at.Add(overdueGrace + time.Millisecond))
	}
	if len(found) == 0 {
		r.setFinding(ctx, "I2", p, 0, nil)
		return false, nil
	}
	r.setFinding(ctx, "I2", p, int64(len(found)), found)
	return true, nil
}

// wakes is I5 for one recipient: the deliveries of the last hour that
// decided a wake (filed by the feed from the delivery ledger and the
// journaled escalations), against the workspace's rate: burst + one per
// period. It returns how many there were.
func (r *run) wakes(ctx context.Context, p string, soon *soonest) (int64, error) {
	key := r.s.wakesKey(r.ws, p)
	since := strconv.FormatInt(r.now.Add(-window).UnixMilli(), 10)
	zs, err := r.s.rdb.ZRangeArgsWithScores(ctx, redis.ZRangeArgs{Key: key, ByScore: true, Start: "(" + since, Stop: "+inf"}).Result()
	if err != nil {
		return 0, fmt.Errorf("wakes of %s: %w", p, err)
	}
	if r.repair {
		r.pipe.ZRemRangeByScore(ctx, key, "-inf", since)
	}
	n := int64(len(zs))
	if n > 0 {
		soon.add(time.UnixMilli(int64(zs[0].Score)).Add(window + time.Millisecond))
	}
	budget := int64(r.settings.Rate.Burst)
	if per := time.Duration(r.settings.Rate.Per); per > 0 {
		budget += int64(window / per)
	}
	if n <= budget {
		r.setFinding(ctx, "I5", p, 0, nil)
		return n, nil
	}
	r.setFinding(ctx, "I5", p, 1, i5Example{Party: p, Wakes: n, Budget: budget,
		Detail: fmt.Sprintf("%d wakes in the last hour; the workspace rate (%d per %s) lets %d through", n, r.settings.Rate.Burst,
			r.settings.Rate.Per, budget)})
	return n, nil
}
