package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/wakegate/wakegate/delivery/escalate"
	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// TypeEscalate is the Asynq task type of a recipient's escalation timer
// (docs/design.md §8). It rides the push queue.
const TypeEscalate = "escalate:check"

// Escalator runs escalation (docs/design.md §8): one timer per recipient, an
// Asynq task at the earliest due of its armed entries (package
// delivery/escalate keeps them), whose handler checks every entry due,
// climbs the ones that escalate one level — an escalated copy in the next
// party's inbox, woken and pushed like any wake, itself armed to climb
// further — and schedules the timer again for the next due. It is the
// router's escalator and hears of the pusher's dead letters. It is safe
// for concurrent use.
type Escalator struct {
	p     *Pusher
	rel   *Releaser // nil: no holds
	store *escalate.Store
	reg   *sessions.Registry
	sup   *supervision.Store
	j     *journal.Journal
	log   *slog.Logger
	m     *escalationMetrics
	now   func() time.Time

	mu      sync.Mutex
	pending map[string]time.Time // workspace "\x00" party → the slot of the timer this process last scheduled
}

// NewEscalator returns the escalator of p's deployment and hooks it into
// p's dead letters. rel (nil: none) holds the escalated copies' pushes
// like any wake; reg, sup and j are the registry, supervision and journal
// the router uses.
func NewEscalator(p *Pusher, rel *Releaser, reg *sessions.Registry, sup *supervision.Store, j *journal.Journal,
	log *slog.Logger, registerer prometheus.Registerer) *Escalator {
	if log == nil {
		log = slog.Default()
	}
	if registerer == nil {
		registerer = prometheus.NewRegistry()
	}
	e := &Escalator{p: p, rel: rel, store: escalate.New(p.rdb, p.cfg.Prefix), reg: reg, sup: sup, j: j,
		log: log.With("component", "escalate"), m: newEscalationMetrics(registerer), now: time.Now}
	p.onDeadLetter = e.deadLettered
	return e
}

type escalationMetrics struct {
	escalations *prometheus.CounterVec
	checks      *prometheus.CounterVec
	lateness    prometheus.Histogram
}

func newEscalationMetrics(reg prometheus.Registerer) *escalationMetrics {
	f := promauto.With(reg)
	m := &escalationMetrics{
		escalations: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_escalations_total",
			Help: "Escalation steps, by the level reached: controller, default, fallback, or undeliverable (nobody left)."},
			[]string{"level"}),
		checks: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_escalation_checks_total",
			Help: "Escalation checks of an entry, by outcome."}, []string{"outcome"}),
		lateness: f.NewHistogram(prometheus.HistogramOpts{Name: "wakegate_escalation_lateness_seconds",
			Help:    "How long after its due an entry's escalation check ran (negative: early, within the timer's slack).",
			Buckets: []float64{-1, -0.5, 0, 0.5, 1, 1.5, 2, 3, 5, 10, 30}}),
	}
	for _, l := range []string{escalate.RungController, escalate.RungDefault, escalate.RungFallback, "undeliverable"} {
		m.escalations.WithLabelValues(l)
	}
	for _, o := range []string{"escalated", "reached", "acked", "not_eligible", "moved", "failed"} {
		m.checks.WithLabelValues(o)
	}
	return m
}

// timer is a TypeEscalate task's payload.
type timer struct {
	Workspace string `json:"ws"`
	Party     string `json:"party"`
}

// timerID is the task id of a recipient's timer for one slot: a re-run of
// whatever scheduled it schedules nothing twice.
func (e *Escalator) timerID(workspace, party, slot string) string {
	sum := sha256.Sum256([]byte(e.p.cfg.Prefix + "\x00" + workspace + "\x00" + party + "\x00escalate\x00" + slot))
	return "esc_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:20]))
}

// Schedule makes sure a recipient's timer will run by its earliest due:
// one Asynq task at the start of the due's second (escalate.Slot), or at
// once when it is due already, under an id derived from the recipient
// and the slot. Calling it again changes nothing. The router reaches it
// through Armed after every delivery that armed an entry (and after
// duplicates, in case the run that armed it crashed before scheduling).
func (e *Escalator) Schedule(ctx context.Context, workspace, party string) error {
	due, ok, err := e.store.Next(ctx, workspace, party)
	if err != nil || !ok {
		return err
	}
	b, _ := json.Marshal(timer{Workspace: workspace, Party: party})
	now := e.now()
	opts := []asynq.Option{asynq.Queue(e.p.QueueOf(workspace, party)), asynq.MaxRetry(25), asynq.Timeout(time.Minute)}
	var id string
	if !due.After(now) {
		// Due already (a dead letter, or a timer behind): at once, under
		// an id of this due — a running timer with it handles it — and of
		// the current 10 s, so a task of that id that failed for good
		// (archived, its id still taken) holds nothing back for long.
		id = e.timerID(workspace, party, "at:"+strconv.FormatInt(due.UnixMilli(), 10)+":"+strconv.FormatInt(now.Unix()/10, 10))
	} else {
		// Later than any running timer's own second: never its id.
		slot := escalate.Slot(due, now)
		id = e.timerID(workspace, party, strconv.FormatInt(slot.Unix(), 10))
		opts = append(opts, asynq.ProcessAt(slot))
	}
	_, err = e.p.client.EnqueueContext(ctx, asynq.NewTask(TypeEscalate, b), append(opts, asynq.TaskID(id))...)
	if err != nil && !errors.Is(err, asynq.ErrTaskIDConflict) {
		return fmt.Errorf("schedule escalation timer of %s: %w", party, err)
	}
	if due.After(now) {
		e.remember(workspace, party, escalate.Slot(due, now), now)
	}
	return nil
}

// Armed is the router's Schedule after a delivery armed an entry due at
// due (zero: not known). When this process has scheduled the recipient's
// timer for a slot still ahead and no later than due, it does nothing:
// that timer checks what is due then and schedules itself again for the
// next due (Check), due included — Schedule would only find its id taken.
func (e *Escalator) Armed(ctx context.Context, workspace, party string, due time.Time) error {
	if !due.IsZero() {
		e.mu.Lock()
		slot, ok := e.pending[workspace+"\x00"+party]
		e.mu.Unlock()
		if ok && slot.After(e.now()) && !due.Before(slot) {
			return nil
		}
	}
	return e.Schedule(ctx, workspace, party)
}

// remember records that the recipient's timer runs at slot, unless an
// earlier one still ahead is known; past slots are forgotten now and then.
func (e *Escalator) remember(workspace, party string, slot, now time.Time) {
	k := workspace + "\x00" + party
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.pending == nil {
		e.pending = map[string]time.Time{}
	}
	if cur, ok := e.pending[k]; ok && cur.After(now) && cur.Before(slot) {
		return
	}
	if len(e.pending) >= 100_000 {
		for k, at := range e.pending {
			if !at.After(now) {
				delete(e.pending, k)
			}
		}
	}
	e.pending[k] = slot
}

// ProcessTask is the Asynq handler of TypeEscalate.
func (e *Escalator) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var tm timer
	if err := json.Unmarshal(t.Payload(), &tm); err != nil {
		return fmt.Errorf("escalation timer payload: %w: %w", err, asynq.SkipRetry)
	}
	return e.Check(ctx, tm.Workspace, tm.Party)
}

// maxRounds bounds one run's pages of due entries (100 each).
const maxRounds = 50

// errBadEntry marks an entry or claim that cannot be escalated however
// often it is retried (its stored JSON does not decode, the inbox refuses
// the copy): its check is given up, logged and counted.
var errBadEntry = errors.New("entry cannot be escalated")

// Check checks every entry of a recipient due now (within escalate.Slack)
// and schedules the timer again for the next due. An entry whose check
// fails (storage) is left armed and the others are checked on; the error
// makes Asynq retry the task, whose run schedules the timer again.
func (e *Escalator) Check(ctx context.Context, workspace, party string) error {
	var errs []error
	failed := map[string]bool{}
	for range maxRounds {
		now := e.now()
		due, err := e.store.Due(ctx, workspace, party, now.Add(escalate.Slack), 100)
		if err != nil {
			return err
		}
		progressed := false
		for _, d := range due {
			if failed[d.CK] {
				continue
			}
			progressed = true
			err := e.check(ctx, workspace, party, d, now)
			switch {
			case errors.Is(err, errBadEntry) || errors.Is(err, inbox.ErrInvalid):
				e.m.checks.WithLabelValues("failed").Inc()
				e.log.Error("escalation given up", "workspace", workspace, "party", party, "entry", d.CK, "err", err)
				if err := e.store.Done(ctx, workspace, party, d.CK, d.Due); err != nil {
					return err
				}
			case err != nil:
				failed[d.CK] = true
				errs = append(errs, fmt.Errorf("escalation of %q for %s: %w", d.CK, party, err))
			}
		}
		if !progressed {
			break
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	return e.Schedule(ctx, workspace, party)
}

// check decides and acts on one due entry.
func (e *Escalator) check(ctx context.Context, ws, party string, d escalate.Pending, now time.Time) error {
	e.m.lateness.Observe(now.Sub(time.UnixMilli(d.Due)).Seconds())
	c := d.Claim
	if c == nil {
		ent, err := e.p.box.Get(ctx, ws, party, d.CK)
		if err != nil {
			return err
		}
		if ent == nil { // acked: an ack stops it
			e.m.checks.WithLabelValues("acked").Inc()
			return e.store.Done(ctx, ws, party, d.CK, d.Due)
		}
		if !ent.Armed || ent.Priority.Rank() < event.Attention.Rank() { // a dead letter of an entry that may not escalate
			e.m.checks.WithLabelValues("not_eligible").Inc()
			return e.store.Done(ctx, ws, party, d.CK, d.Due)
		}
		decided, err := e.decide(ctx, ws, party, ent, d, now)
		if err != nil {
			return err
		}
		if decided == nil {
			e.m.checks.WithLabelValues("reached").Inc()
			e.log.Debug("not escalated: recipient reached", "workspace", ws, "party", party, "entry", d.CK, "seq", ent.Seq)
			return e.store.Done(ctx, ws, party, d.CK, d.Due)
		}
		claimed, ok, err := e.store.Claim(ctx, ws, party, d.CK, *decided)
		if err != nil {
			return err
		}
		if !ok { // acked, raised or re-armed since it was read: its own check comes
			e.m.checks.WithLabelValues("moved").Inc()
			return nil
		}
		c = &claimed
	}
	if err := e.apply(ctx, ws, party, c, now); err != nil {
		return err
	}
	return e.store.Done(ctx, ws, party, d.CK, d.Due)
}

// settingsOf reads an entry's settings snapshot over the defaults.
func settingsOf(raw json.RawMessage) supervision.Settings {
	st := supervision.Defaults()
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &st) // written by the router; a bad one reads as the defaults
	}
	return st
}

// decide returns the claim of an entry that escalates, nil when it does
// not.
func (e *Escalator) decide(ctx context.Context, ws, party string, ent *inbox.Entry, d escalate.Pending, now time.Time) (*escalate.Claim, error) {
	st := settingsOf(ent.Settings)
	s, err := e.reg.Get(ctx, ws, party, now)
	if err != nil {
		return nil, err
	}
	ep, err := e.p.endpoints.Get(ctx, ws, party)
	if err != nil {
		return nil, err
	}
	reason := escalate.Decide(escalate.Facts{
		Party: party, Liveness: s.Liveness, SeenAt: s.SeenAt,
		Since:       time.UnixMilli(d.Due).Add(-time.Duration(st.EscalateAfter)),
		HasEndpoint: ep != nil && !ep.Disabled(), Priority: ent.Priority,
		EscalateUnacked: st.EscalateUnacked, DeadLettered: d.DeadLettered,
	})
	if reason == "" {
		return nil, nil
	}
	var ev event.Event
	if err := json.Unmarshal(ent.Event, &ev); err != nil {
		return nil, fmt.Errorf("headline of %q: %w: %w", ent.CoalesceKey, err, errBadEntry)
	}
	var path []string
	level, rungStr := 1, ""
	if x := ent.Escalated; x != nil {
		path, level, rungStr = append(path, x.Path...), x.Level+1, x.Rung
	}
	path = append(path, party)
	chain := escalate.Chain(&ev)
	var edges map[string][]supervision.Edge
	if len(chain) > 0 {
		if edges, err = e.sup.EdgesFor(ctx, ws, chain); err != nil {
			return nil, err
		}
	}
	fallback := ""
	if st.Fallback != nil {
		fallback = st.Fallback.Party
	}
	ladder := escalate.Ladder(chain, edges, st.DefaultController, fallback)
	skip := func(p string) bool {
		return p == party || p == event.SessionSubject(ev.SessionID) || p == escalate.Causer(&ev) || containsStr(path, p)
	}
	next, ok, err := escalate.Next(ctx, chain, ladder, escalate.Standing(chain, ladder, party, rungStr), skip,
		func(ctx context.Context, p string) (bool, error) {
			s, err := e.reg.Get(ctx, ws, p, now)
			return err == nil && s.Liveness == sessions.Dead && escalate.IsSession(p), err
		})
	if err != nil {
		return nil, err
	}
	c := &escalate.Claim{Due: d.Due, Reason: reason, Level: level, Path: path, Seq: ent.Seq, Event: ent.Event, Settings: ent.Settings}
	if ok {
		c.To, c.Rung = next.Party, next.String()
	}
	return c, nil
}

func containsStr(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// apply carries out a claim: the escalated copy in the next party's inbox
// (woken, pushed and armed like any wake) and one wakegate.escalated in
// the journal — or, with nobody left, one wakegate.fault.undeliverable.
// Every effect is keyed by the fact, so replaying a claim adds nothing.
func (e *Escalator) apply(ctx context.Context, ws, party string, c *escalate.Claim, now time.Time) error {
	var ev event.Event
	if err := json.Unmarshal(c.Event, &ev); err != nil {
		return fmt.Errorf("claimed event: %w: %w", err, errBadEntry)
	}
	if c.To == "" {
		return e.undeliverable(ctx, ws, party, &ev, c)
	}
	st := settingsOf(c.Settings)
	var presence holds.Presence
	if e.rel != nil {
		var err error
		if presence, err = e.rel.h.GetPresence(ctx, ws, c.To); err != nil {
			return err
		}
	}
	x := &inbox.Escalation{Level: c.Level, From: party, Path: c.Path, Rung: c.Rung, Reason: c.Reason}
	res, err := e.p.box.Deliver(ctx, inbox.Delivery{Workspace: ws, Party: c.To, Event: &ev, Via: inbox.ViaEscalation,
		Attended: presence.Attended(now), Settings: c.Settings, Escalation: x,
		EscalateAt: now.Add(time.Duration(st.EscalateAfter))}, now)
	if err != nil {
		return err
	}
	if res.Wake {
		if err := e.pushWake(ctx, ws, c.To, res, &ev, st, presence, now); err != nil {
			return err
		}
	}
	if res.Armed || res.Duplicate {
		if err := e.Schedule(ctx, ws, c.To); err != nil {
			return err
		}
	}
	data, _ := json.Marshal(map[string]any{"from": party, "to": c.To, "level": c.Level, "rung": c.Rung, "reason": c.Reason,
		"path": c.Path, "seq": c.Seq, "to_seq": res.Seq,
		"event": map[string]string{"source": ev.Source, "id": ev.ID, "type": ev.Type, "subject": ev.Subject}})
	added, err := e.journal(ctx, &event.Event{ID: "escalated/" + strconv.Itoa(c.Level) + "/" + party + "/" + ev.Source + "/" + ev.ID,
		Type: event.TypeWakegateEscalated, Summary: fmt.Sprintf("%s about %s escalated from %s to %s (%s)", ev.Type, ev.Subject, party, c.To, c.Reason),
		Data: data}, &ev)
	if err != nil {
		return err
	}
	if added {
		r, _ := escalate.ParseRung(c.Rung)
		e.m.escalations.WithLabelValues(r.Kind).Inc()
		e.m.checks.WithLabelValues("escalated").Inc()
		e.log.Info("escalated", "workspace", ws, "from", party, "to", c.To, "level", c.Level, "rung", c.Rung,
			"reason", c.Reason, "event_id", ev.ID, "type", ev.Type, "subject", ev.Subject)
	}
	return nil
}

// pushWake pushes an escalated copy's wake as the router pushes any wake:
// through the holds (quiet, PAUSED, the rate cap), to the party's
// endpoint if it has one.
func (e *Escalator) pushWake(ctx context.Context, ws, party string, res inbox.Result, ev *event.Event,
	st supervision.Settings, presence holds.Presence, now time.Time) error {
	if e.rel == nil {
		return e.p.Enqueue(ctx, ws, party, res, ev)
	}
	d, err := e.rel.h.Decide(ctx, holds.Request{Workspace: ws, Party: party, Result: res, Event: ev,
		Settings: st, Presence: presence, Now: now})
	if err != nil {
		return err
	}
	if d.Push {
		return e.p.Enqueue(ctx, ws, party, res, ev)
	}
	if !d.Due.IsZero() {
		return e.rel.Schedule(ctx, ws, party, d.Reason, d.Due)
	}
	return nil
}

// undeliverable journals one wakegate.fault.undeliverable for an event
// whose escalation found nobody above the party (no fallback configured,
// or the fallback itself unreached): one per event, whoever topped out.
func (e *Escalator) undeliverable(ctx context.Context, ws, party string, ev *event.Event, c *escalate.Claim) error {
	data, _ := json.Marshal(map[string]any{"source": ev.Source, "id": ev.ID, "type": ev.Type, "subject": ev.Subject,
		"seq": ev.Seq, "from": party, "level": c.Level, "path": c.Path, "reason": c.Reason,
		"detail": "escalation found nobody above " + party + " to reach (no fallback, or the fallback unreached)"})
	added, err := e.journal(ctx, &event.Event{ID: "undeliverable/escalation/" + ev.Source + "/" + ev.ID,
		Type: event.TypeWakegateFaultUndeliverable, Summary: "nobody could be reached about " + ev.Type + " about " + ev.Subject + " (escalation topped out at " + party + ")",
		Data: data}, ev)
	if err != nil {
		return err
	}
	if added {
		e.m.escalations.WithLabelValues("undeliverable").Inc()
		e.m.checks.WithLabelValues("escalated").Inc()
		e.log.Warn("escalation undeliverable", "workspace", ws, "from", party, "level", c.Level, "reason", c.Reason,
			"event_id", ev.ID, "type", ev.Type, "subject", ev.Subject)
	}
	return nil
}

// journal appends an internal event about of (never routed), once per id.
func (e *Escalator) journal(ctx context.Context, f *event.Event, of *event.Event) (bool, error) {
	f.SpecVersion, f.Source, f.Subject, f.Workspace, f.SessionID = event.SpecVersion, event.ServerSource(of.Workspace), of.Subject, of.Workspace, of.SessionID
	f.Time, f.DataContentType, f.Priority = e.now().UTC(), "application/json", event.Internal
	_, added, err := e.j.Append(ctx, f)
	return added, err
}

// deadLettered is the pusher's dead-letter hook: the entries of a push
// that became a dead letter escalate at once (docs/design.md §8) — the entry of
// ck, or of each seq still current (a digest's).
func (e *Escalator) deadLettered(ctx context.Context, ws, party, ck string, seqs []int64) error {
	var cks []string
	if ck != "" {
		cks = append(cks, ck)
	}
	for _, s := range seqs {
		k, err := e.p.box.CoalesceKeyAt(ctx, ws, party, s)
		if err != nil {
			return err
		}
		if k != "" && !containsStr(cks, k) {
			cks = append(cks, k)
		}
	}
	if len(cks) == 0 {
		return nil
	}
	if err := e.store.DeadLettered(ctx, ws, party, cks, e.now()); err != nil {
		return err
	}
	return e.Schedule(ctx, ws, party)
}
