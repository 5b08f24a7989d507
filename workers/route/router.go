package route

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/escalate"
	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// Router decides who must hear each journaled event (docs/design.md §5) and
// delivers it into their inboxes, recording every delivery in the shard's
// ledger. Routing is idempotent: inbox deliveries are deduplicated on
// (recipient, event), the undeliverable fault has a fact id, and the
// ledger is read as a set.
type Router struct {
	rdb      redis.UniversalClient
	j        *journal.Journal
	reg      *sessions.Registry
	subs     *subscriptions.Store
	sup      *supervision.Store
	box      *inbox.Inbox
	now      func() time.Time
	m        *routerMetrics
	push     pusher // nil: no outbound pushes
	holds    holder // nil: no presence, no holds
	release  releaser
	escalate escalator // nil: no escalation
}

// escalator keeps the escalation timers (package workers/tasks, docs/design.md §8):
// Armed makes sure a recipient's timer runs by its earliest armed due
// after a delivery armed an entry due at due (zero: not known); idempotent.
type escalator interface {
	Armed(ctx context.Context, workspace, party string, due time.Time) error
}

// WithEscalation makes the router arm the escalation of every delivery
// that may escalate (escalate.Eligible) at escalate_after, in the inbox
// write itself, and schedule the recipient's timer. It returns r.
func (r *Router) WithEscalation(e escalator) *Router {
	r.escalate = e
	return r
}

// holder is presence, quiet and the holds decision (package
// delivery/holds): the router reads its recipients' presence and quiet
// before delivering (attended turns attention+ into alert or notice) and
// asks Decide before pushing a wake (quiet → PAUSED → rate cap; docs/design.md §7).
type holder interface {
	Lookup(ctx context.Context, workspace string, parties []string, now time.Time) (map[string]holds.State, error)
	QueueLookup(ctx context.Context, p redis.Pipeliner, workspace string, parties []string, now time.Time) func() (map[string]holds.State, error)
	DeliverAndDecide(ctx context.Context, box *inbox.Inbox, d inbox.Delivery, r holds.Request) (inbox.Result, holds.Decision, error)
}

// releaser schedules the digest that ends a hold with a due time (the rate
// cap's next token, a PAUSED's end); idempotent per (recipient, reason,
// slot).
type releaser interface {
	Schedule(ctx context.Context, workspace, party, reason string, at time.Time) error
}

// WithHolds makes the router honour presence and the holds before every
// push. It returns r.
func (r *Router) WithHolds(h holder, rel releaser) *Router {
	r.holds, r.release = h, rel
	return r
}

// pusher enqueues the outbound push of an inbox update that decided a
// wake, when the party has an endpoint (package workers/tasks). It must be
// idempotent on (workspace, party, res.Seq): a re-run of the routing calls
// it again with the original result.
type pusher interface {
	Enqueue(ctx context.Context, workspace, party string, res inbox.Result, e *event.Event) error
}

// prefetcher is a pusher that reads endpoints with what the router reads
// before it delivers (package workers/tasks): EnqueueTo is Enqueue with the
// endpoint so read (nil: none).
type prefetcher interface {
	QueueEndpoint(ctx context.Context, p redis.Pipeliner, workspace, party string) func() (*outbound.Endpoint, error)
	EnqueueTo(ctx context.Context, ep *outbound.Endpoint, workspace, party string, res inbox.Result, e *event.Event) error
}

// WithPusher makes the router enqueue a push after every delivery that
// decided a wake, duplicates included, so a crash between the inbox write
// and the enqueue loses no push. It returns r.
func (r *Router) WithPusher(p pusher) *Router {
	r.push = p
	return r
}

// NewRouter returns a router.
func NewRouter(rdb redis.UniversalClient, j *journal.Journal, reg *sessions.Registry, subs *subscriptions.Store,
	sup *supervision.Store, box *inbox.Inbox, registerer prometheus.Registerer) *Router {
	return &Router{rdb: rdb, j: j, reg: reg, subs: subs, sup: sup, box: box, now: time.Now,
		m: newRouterMetrics(registerer)}
}

type routerMetrics struct {
	deliveries    *prometheus.CounterVec
	kinds         *prometheus.CounterVec
	undeliverable prometheus.Counter
}

func newRouterMetrics(reg prometheus.Registerer) *routerMetrics {
	f := promauto.With(reg)
	m := &routerMetrics{
		deliveries: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_route_deliveries_total",
			Help: "Inbox deliveries by why the recipient got the event."}, []string{"via"}),
		kinds: f.NewCounterVec(prometheus.CounterOpts{Name: "wakegate_route_decisions_total",
			Help: "New inbox deliveries by what they decided: wake or alert (woke the recipient), notice (rides its next read: attended, or an update that does not wake again), digest (info, inbox-only)."}, []string{"kind"}),
		undeliverable: f.NewCounter(prometheus.CounterOpts{Name: "wakegate_route_undeliverable_total",
			Help: "Session events of attention or more that reached nobody, not even the fallback."}),
	}
	for _, v := range []string{inbox.ViaSubscription, inbox.ViaController, inbox.ViaObserver, inbox.ViaFallback, inbox.ViaDirect} {
		m.deliveries.WithLabelValues(v)
	}
	for _, k := range []string{inbox.KindWake, inbox.KindAlert, inbox.KindNotice, inbox.KindDigest} {
		m.kinds.WithLabelValues(k)
	}
	return m
}

// LedgerKey is the stream of a shard's delivery ledger: one entry per
// delivery (event seq, source, id, recipient, inbox seq, via), trimmed to a
// bounded length. A re-run after a crash may record a delivery again with
// the same inbox seq: read it as a set.
func LedgerKey(j *journal.Journal, shard int) string { return j.Keys(shard).Ledger() }

// LedgerLen bounds a shard's ledger (approximately: MAXLEN ~).
const LedgerLen = 100_000

// recipient is one party an event goes to, and why.
type recipient struct {
	via    string
	mode   string
	waiter bool
	// controller: a subscriber that is also the effective controller
	// (its entry is not "only through its own subscription": it escalates).
	controller bool
	// redelivered, when set, makes the delivery an operator's redelivery
	// (inbox dedup bypassed; see redeliver.go) and receives its result.
	redelivered *inbox.Result
}

// Handle routes one event; it is the consumer's Handler.
func (r *Router) Handle(ctx context.Context, shard int, e *event.Event) error {
	if !routed(e) {
		return nil
	}
	now := r.now()
	if e.Type == event.TypeSessionSpawned && len(e.Lineage) > 0 {
		// The spawner controls its child (scope subtree) unless one is set.
		if err := r.sup.SetDefaultController(ctx, e.Workspace, e.SessionID, e.Lineage[0]); err != nil {
			return err
		}
	}
	d, v, err := r.route(ctx, e, now)
	if err != nil {
		return err
	}
	e = v.event // with the lineage routing resolved
	if d.undeliverable {
		return r.undeliverable(ctx, e)
	}
	to := d.to
	if err := r.pausedSessions(ctx, e, now, to, v.pause); err != nil { // see paused.go
		return err
	}
	if err := r.deliverAll(ctx, shard, e, to, v, now); err != nil {
		return err
	}
	if e.Terminal && e.Subject != "" {
		if _, err := r.subs.CloseForSubject(ctx, e.Workspace, e.Subject); err != nil {
			return err
		}
	}
	return nil
}

// route resolves who must hear e now (docs/design.md §5) and what delivering
// needs of what it read (view): gather reads the snapshot, decide applies
// the rules to it. It writes nothing.
func (r *Router) route(ctx context.Context, e *event.Event, now time.Time) (decision, *view, error) {
	snap, v, err := r.gather(ctx, e, now)
	if err != nil {
		return decision{}, nil, err
	}
	return decide(snap, v.event), v, nil // the event as routed: its lineage resolved
}

// snapshot is everything the rules of docs/design.md §5 read about one event:
// gather reads it from Redis, decide is a pure function of it.
type snapshot struct {
	settings supervision.Settings
	// chain is e's session followed by its lineage, nearest ancestor
	// first; nil when e is about no session.
	chain []string
	// matches are the subscriptions e matches (none are read for a
	// message), oldest first.
	matches []subscriptions.Subscription
	// edges are the supervision edges of chain's sessions, by session.
	edges map[string][]supervision.Edge
	// dead tells which controller candidates are dead; a party absent
	// from it is not (docs/design.md §2: unknown parties are not dead).
	dead map[string]bool
}

// decision is who hears an event, and why; undeliverable when a session
// event of attention or more reaches nobody, not even the fallback.
type decision struct {
	to            map[string]recipient
	undeliverable bool
}

// routed reports whether e is routed at all: wakegate.* and internal
// events never are (docs/design.md §5).
func routed(e *event.Event) bool {
	return !strings.HasPrefix(e.Type, "wakegate.") && e.Priority != event.Internal
}

// isMessage: a message goes to its target and the target's observers only
// (docs/design.md §7): no subscriber, no controller, no fallback.
func isMessage(e *event.Event) bool { return e.Type == event.TypeMessageSent && e.SessionID != "" }

// chainOf is e's session followed by its lineage; nil without a session.
func chainOf(e *event.Event) []string {
	if e.SessionID == "" {
		return nil
	}
	return append([]string{e.SessionID}, e.Lineage...)
}

// candidates are the parties that may be e's effective controller, in the
// order they are considered: the applicable controller edges' holders,
// then the workspace default controller. None for a message or an event
// about no session.
func candidates(s *snapshot, e *event.Event) []string {
	if s.chain == nil || isMessage(e) {
		return nil
	}
	var out []string
	for _, edge := range supervision.Applicable(s.chain, s.edges) {
		if edge.Role == supervision.Controller {
			out = append(out, edge.Holder)
		}
	}
	if s.settings.DefaultController != "" {
		out = append(out, s.settings.DefaultController)
	}
	return out
}

// mayHear lists, once each, every party decide may name from s (those
// whose holds state and endpoint gather reads): the subscribers, the
// message's target, the observers, the controller candidates and the
// fallback.
func mayHear(s *snapshot, e *event.Event) []string {
	seen := map[string]bool{}
	var out []string
	add := func(p string) {
		if p != "" && !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, sub := range s.matches {
		add(sub.Owner)
	}
	if isMessage(e) {
		add(event.SessionSubject(e.SessionID))
	}
	for _, edge := range supervision.Applicable(s.chain, s.edges) {
		if edge.Role == supervision.Observer {
			add(edge.Holder)
		}
	}
	for _, c := range candidates(s, e) {
		add(c)
	}
	if f := s.settings.Fallback; f != nil && needsSomeone(e) {
		add(f.Party) // decide names the fallback for no other event
	}
	return out
}

// needsSomeone reports whether e must reach someone, the fallback if
// no one else (docs/design.md §5): an event about a session of attention or
// more.
func needsSomeone(e *event.Event) bool {
	return strings.HasPrefix(e.Subject, "session:") && e.Priority.Rank() >= event.Attention.Rank()
}

// decide applies the rules of docs/design.md §5 to one event and what gather read
// about it: subscribers, observers of e's session and of its ancestors
// with scope subtree, the effective controller (own, an ancestor's
// subtree controller, the workspace default; a dead one skipped), a
// message's target; minus the party that caused e and the subject session
// itself (except through its own subscriptions or as a message's target);
// then the fallback when an attention+ session event would reach nobody,
// and undeliverable when even that leaves nobody. It does no I/O.
func decide(s *snapshot, e *event.Event) decision {
	to := map[string]recipient{}
	if !routed(e) {
		return decision{to: to}
	}
	message := isMessage(e)
	for _, sub := range s.matches {
		if message {
			break // a message reaches no subscriber
		}
		to[sub.Owner] = recipient{via: inbox.ViaSubscription, mode: sub.Delivery, waiter: sub.Owner == "session:"+e.SessionID}
	}
	if message {
		to[event.SessionSubject(e.SessionID)] = recipient{via: inbox.ViaDirect}
	}
	for _, edge := range supervision.Applicable(s.chain, s.edges) {
		if _, ok := to[edge.Holder]; !ok && edge.Role == supervision.Observer {
			to[edge.Holder] = recipient{via: inbox.ViaObserver}
		}
	}
	if s.chain != nil && !message {
		dead := func(_ context.Context, _, party string) (bool, error) { return s.dead[party], nil }
		// dead never fails, so neither does the resolution.
		res, _ := supervision.EffectiveController(context.Background(), e.Workspace, s.chain, s.edges, s.settings.DefaultController, dead)
		if controller := res.Party; controller != "" {
			if rc, ok := to[controller]; !ok || rc.via == inbox.ViaObserver {
				to[controller] = recipient{via: inbox.ViaController}
			} else if rc.via == inbox.ViaSubscription {
				rc.controller = true
				to[controller] = rc
			}
		}
	}

	// A sender never hears its own event; the subject session hears about
	// itself only through its own subscriptions (or as a message's target).
	delete(to, causer(e))
	if self := "session:" + e.SessionID; e.SessionID != "" {
		if rc, ok := to[self]; ok && rc.via != inbox.ViaSubscription && rc.via != inbox.ViaDirect {
			delete(to, self)
		}
	}
	needsSomeone := needsSomeone(e)
	if len(to) == 0 && needsSomeone {
		if f := s.settings.Fallback; !message && f != nil && f.Party != "" && f.Party != causer(e) {
			to[f.Party] = recipient{via: inbox.ViaFallback}
		}
	}
	return decision{to: to, undeliverable: len(to) == 0 && needsSomeone}
}

// gather reads what decide needs about e, in two pipelined round trips:
// first the settings, the session's record, the subscriptions e matches
// and the supervision edges up its chain; then the liveness of the
// controller candidates, and the holds state and push endpoint of every
// party that may hear e (a third when the session has labels, or
// ancestors the event does not carry: the subscriptions are matched again
// with them, and the ancestors' edges read). It writes nothing.
func (r *Router) gather(ctx context.Context, e *event.Event, now time.Time) (*snapshot, *view, error) {
	b := batchFrom(ctx)
	message := isMessage(e)
	snap := &snapshot{chain: chainOf(e)}

	p := r.rdb.Pipeline()
	settings, ok := b.settingsFor(e.Workspace)
	if !ok {
		b.prefetchSettings(ctx, r.rdb, r.sup)
		settings, ok = b.settingsFor(e.Workspace)
	}
	var readSettings func() (supervision.Settings, error)
	if !ok {
		readSettings = r.sup.QueueSettings(ctx, p, e.Workspace)
	}
	var readSession func(time.Time) (*sessions.Session, error)
	var readMatches func() ([]subscriptions.Subscription, error)
	if !message {
		if e.SessionID != "" {
			readSession = r.reg.Queue(ctx, p, e.Workspace, event.SessionSubject(e.SessionID)) // its labels
		}
		if c, ok := b.prefetched(ctx, e, r.subs); ok {
			snap.matches = r.subs.MatchFrom(ctx, e, c)
		} else {
			readMatches = r.subs.QueueMatch(ctx, p, e, nil)
		}
	}
	// A deployment status also reaches the PRs its data names: their
	// subscribers are matched as if it were about each of them.
	var readAlso []func() ([]subscriptions.Subscription, error)
	if !message {
		for _, subj := range alsoAbout(e) {
			x := *e
			x.Subject = subj
			readAlso = append(readAlso, r.subs.QueueMatch(ctx, p, &x, nil))
		}
	}
	var readEdges func() (map[string][]supervision.Edge, error)
	if snap.chain != nil {
		readEdges = r.sup.QueueEdgesFor(ctx, p, e.Workspace, snap.chain)
	}
	pause := r.reg.QueuePausePeek(ctx, p, e, now) // see paused.go
	_, _ = p.Exec(ctx)                            // each read below meets its own command's error
	var err error
	if readSettings != nil {
		if settings, err = readSettings(); err != nil {
			return nil, nil, err
		}
		b.keepSettings(e.Workspace, settings)
	}
	snap.settings = settings
	if readMatches != nil {
		if snap.matches, err = readMatches(); err != nil {
			return nil, nil, err
		}
	}
	if readEdges != nil {
		if snap.edges, err = readEdges(); err != nil {
			return nil, nil, err
		}
	}
	if readSession != nil {
		s, err := readSession(now)
		if err != nil {
			return nil, nil, err
		}
		if len(e.Lineage) == 0 && len(s.Lineage) > 0 {
			// An event about a session that carries no lineage (what the
			// tracker derives about a linked PR) reaches the session's
			// chain as the session's own events do (docs/design.md §5):
			// its recorded ancestors join the chain, their subtree
			// subscriptions and supervision edges are read in one more
			// round trip.
			resolved := *e
			resolved.Lineage = slices.Clone(s.Lineage)
			e = &resolved
			snap.chain = chainOf(e)
			p := r.rdb.Pipeline()
			readMatches := r.subs.QueueMatch(ctx, p, e, s.Labels)
			readEdges := r.sup.QueueEdgesFor(ctx, p, e.Workspace, snap.chain)
			_, _ = p.Exec(ctx)
			if snap.matches, err = readMatches(); err != nil {
				return nil, nil, err
			}
			if snap.edges, err = readEdges(); err != nil {
				return nil, nil, err
			}
		} else if len(s.Labels) > 0 { // the label index sets join the match
			if snap.matches, err = r.subs.Match(ctx, e, s.Labels); err != nil {
				return nil, nil, err
			}
		}
	}

	for _, read := range readAlso {
		also, err := read()
		if err != nil {
			return nil, nil, err
		}
		for _, s := range also {
			if !slices.ContainsFunc(snap.matches, func(m subscriptions.Subscription) bool { return m.ID == s.ID }) {
				snap.matches = append(snap.matches, s)
			}
		}
	}

	// The second round trip: who of the controller candidates is alive,
	// and the holds state and endpoint of everyone who may hear e.
	p = r.rdb.Pipeline()
	lives := map[string]func(time.Time) (*sessions.Session, error){}
	for _, c := range candidates(snap, e) {
		if _, ok := lives[c]; !ok {
			lives[c] = r.reg.Queue(ctx, p, e.Workspace, c)
		}
	}
	may := mayHear(snap, e)
	var readStates func() (map[string]holds.State, error)
	if r.holds != nil && len(may) > 0 {
		readStates = r.holds.QueueLookup(ctx, p, e.Workspace, may, now)
	}
	var readEndpoints map[string]func() (*outbound.Endpoint, error)
	if pf, ok := r.push.(prefetcher); ok {
		readEndpoints = make(map[string]func() (*outbound.Endpoint, error), len(may))
		for _, party := range may {
			readEndpoints[party] = pf.QueueEndpoint(ctx, p, e.Workspace, party)
		}
	}
	if len(lives) > 0 || readStates != nil || len(readEndpoints) > 0 {
		_, _ = p.Exec(ctx)
	}

	snap.dead = make(map[string]bool, len(lives))
	for party, read := range lives {
		s, err := read(now)
		if err != nil {
			return nil, nil, fmt.Errorf("liveness of %s: %w", party, err)
		}
		snap.dead[party] = s.Liveness == sessions.Dead
	}
	v := &view{event: e, settings: settings, pause: pause()}
	if readStates != nil {
		if v.states, err = readStates(); err != nil {
			return nil, nil, err
		}
	}
	if readEndpoints != nil {
		v.endpoints = make(map[string]*outbound.Endpoint, len(readEndpoints))
		for party, read := range readEndpoints {
			if v.endpoints[party], err = read(); err != nil {
				return nil, nil, err
			}
		}
	}
	return snap, v, nil
}

// maxAlso bounds the other subjects an event reaches.
const maxAlso = 10

// alsoAbout lists the subjects e reaches besides its own: a deployment
// status reaches the PRs whose head its sha is, which the tracker names
// in data.pull_requests (docs/design.md §3).
func alsoAbout(e *event.Event) []string {
	if e.Type != event.TypeGitHubDeploymentStatus || len(e.Data) == 0 {
		return nil
	}
	var d struct {
		Repo string `json:"repo"`
		PRs  []int  `json:"pull_requests"`
	}
	if json.Unmarshal(e.Data, &d) != nil || d.Repo == "" || !strings.HasPrefix(e.Subject, "github:"+d.Repo+"@") {
		return nil
	}
	var out []string
	for _, n := range d.PRs {
		if n > 0 && len(out) < maxAlso {
			out = append(out, event.PRSubject(d.Repo, n))
		}
	}
	return out
}

// view is what gather read besides who they are: the event as
// routed, the workspace settings, and for every party that may hear the event its holds state
// (nil without holds) and its endpoint (nil map: not read).
type view struct {
	event     *event.Event // e, with the lineage routing resolved (see recipients)
	settings  supervision.Settings
	states    map[string]holds.State
	endpoints map[string]*outbound.Endpoint
	// pause: the session's pause marker has something to decide for the
	// event (sessions.Registry.QueuePausePeek); false spares the call.
	pause bool
}

// deliverAll delivers e into each recipient's inbox, then pushes the
// wakes (through the holds) and arms the escalations those deliveries
// decided. Recipients are delivered concurrently (at most
// recipientParallel at once), with the holds state recipients read (those
// it lacks are read in one round trip), and the ledger written in one
// pipeline at the end (a crash before it: the re-run delivers duplicates
// under the same inbox seqs and writes it then).
func (r *Router) deliverAll(ctx context.Context, shard int, e *event.Event, to map[string]recipient, v *view, now time.Time) error {
	if len(to) == 0 {
		return nil
	}
	settings, states := v.settings, v.states
	parties := make([]string, 0, len(to))
	var missing []string
	for p := range to {
		parties = append(parties, p)
		if _, ok := states[p]; !ok {
			missing = append(missing, p)
		}
	}
	if r.holds != nil && len(missing) > 0 { // an operator's redelivery to a party recipients did not name
		more, err := r.holds.Lookup(ctx, e.Workspace, missing, now)
		if err != nil {
			return err
		}
		states = maps.Clone(states)
		if states == nil {
			states = make(map[string]holds.State, len(more))
		}
		maps.Copy(states, more)
	}
	snapshot, _ := json.Marshal(settings)
	// e's JSON and its held item's tail are the same for every party: built
	// once here, not once per party (an error is met by each delivery,
	// which then builds its own).
	var eventJSON, tail string
	if b, err := e.MarshalJSON(); err == nil {
		eventJSON = string(b)
		if r.holds != nil && r.push != nil {
			tail, _ = holds.ItemTail(e, now, eventJSON)
		}
	}
	seqs := make([]int64, len(parties))
	err := each(ctx, len(parties), recipientParallel, func(ctx context.Context, i int) error {
		party, rc, st := parties[i], to[parties[i]], states[parties[i]]
		var escalateAt time.Time // docs/design.md §8: see escalate.Eligible
		if r.escalate != nil && escalate.Eligible(rc.via, rc.mode, rc.controller, e.Priority) {
			escalateAt = now.Add(time.Duration(settings.EscalateAfter))
		}
		d := inbox.Delivery{Workspace: e.Workspace, Party: party, Event: e, EventJSON: eventJSON, Via: rc.via,
			Mode: rc.mode, Waiter: rc.waiter, Attended: st.Presence.Attended(now), Settings: snapshot, SettingsCompact: true, EscalateAt: escalateAt,
			Redelivery: rc.redelivered != nil}
		var res inbox.Result
		var hold *holds.Decision // the holds decision of a wake to push, taken with the delivery
		var err error
		if r.holds != nil && r.push != nil {
			var dec holds.Decision
			res, dec, err = r.holds.DeliverAndDecide(ctx, r.box, d, holds.Request{Workspace: e.Workspace, Party: party,
				Event: e, Waiter: rc.waiter, Settings: settings, Presence: st.Presence, Quiet: &st.Quiet, Now: now, ItemTail: tail})
			hold = &dec
		} else {
			res, err = r.box.Deliver(ctx, d, now)
		}
		if errors.Is(err, inbox.ErrInvalid) {
			return fmt.Errorf("deliver %s to %s: %w: %w", e.ID, party, err, ErrPermanent)
		}
		if err != nil {
			return err
		}
		seqs[i] = res.Seq
		if rc.redelivered != nil {
			*rc.redelivered = res
		}
		if !res.Duplicate {
			r.m.deliveries.WithLabelValues(rc.via).Inc()
			r.m.kinds.WithLabelValues(res.Kind).Inc()
		}
		if res.Wake && r.push != nil {
			if err := r.pushWake(ctx, party, res, hold, e, v); err != nil {
				return err
			}
		}
		if res.Armed || (res.Duplicate && !escalateAt.IsZero()) { // a duplicate: the run that armed it may have crashed here
			if !res.Armed {
				escalateAt = time.Time{} // not armed by this call: the due is not known
			}
			return r.escalate.Armed(ctx, e.Workspace, party, escalateAt)
		}
		return nil
	})
	if err != nil {
		return err
	}
	ledger := make([][]any, len(parties))
	for i, party := range parties {
		ledger[i] = []any{"seq", e.Seq, "source", e.Source, "id", e.ID, "to", party, "inbox_seq", seqs[i], "via", to[party].via}
	}
	if b := batchFrom(ctx); b != nil {
		b.record(ledger) // written with the batch's cursor move (Consumer.advance)
		return nil
	}
	pipe := r.rdb.Pipeline()
	for _, values := range ledger {
		pipe.XAdd(ctx, &redis.XAddArgs{Stream: LedgerKey(r.j, shard), MaxLen: LedgerLen, Approx: true, Values: values})
	}
	_, err = pipe.Exec(ctx)
	return err
}

// recipientParallel bounds the recipients of one event delivered at once.
const recipientParallel = 16

// each runs f(0) … f(n-1), at most limit at once (inline when n is 1),
// and returns the first error; after one, the rest see ctx cancelled.
func each(ctx context.Context, n, limit int, f func(ctx context.Context, i int) error) error {
	if n == 1 {
		return f(ctx, 0)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	sem := make(chan struct{}, limit)
	var wg sync.WaitGroup
	for i := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if ctx.Err() != nil {
				return
			}
			if err := f(ctx, i); err != nil {
				cancel(err)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return ctx.Err()
}

// pushWake pushes a wake unless the holds decision keeps it (the entry
// stays in the inbox either way); a hold with a due time schedules its
// digest. hold is nil without holds.
func (r *Router) pushWake(ctx context.Context, party string, res inbox.Result, hold *holds.Decision, e *event.Event, v *view) error {
	if hold != nil && !hold.Push {
		if !hold.Due.IsZero() && r.release != nil {
			return r.release.Schedule(ctx, e.Workspace, party, hold.Reason, hold.Due)
		}
		return nil
	}
	if ep, ok := v.endpoints[party]; ok {
		return r.push.(prefetcher).EnqueueTo(ctx, ep, e.Workspace, party, res, e)
	}
	return r.push.Enqueue(ctx, e.Workspace, party, res, e)
}

// causer is the party that caused e: an agent event's pusher, or a
// message's sender.
func causer(e *event.Event) string {
	if e.Type == event.TypeMessageSent {
		var d struct {
			Source string `json:"source"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.Source != "" {
			return d.Source
		}
	}
	if rest, ok := strings.CutPrefix(e.Source, "//wakegate/"+e.Workspace+"/"); ok {
		return rest
	}
	return ""
}

// undeliverable journals one wakegate.fault.undeliverable per event that
// reached nobody: a fact id, so a re-run adds nothing.
func (r *Router) undeliverable(ctx context.Context, e *event.Event) error {
	data, _ := json.Marshal(map[string]any{"seq": e.Seq, "source": e.Source, "id": e.ID, "type": e.Type, "subject": e.Subject,
		"reason": "no subscriber, no supervisor and no fallback"})
	fault := &event.Event{SpecVersion: event.SpecVersion, ID: "undeliverable/" + e.Source + "/" + e.ID,
		Source: event.ServerSource(e.Workspace), Type: event.TypeWakegateFaultUndeliverable, Subject: e.Subject,
		Time: r.now().UTC(), DataContentType: "application/json", Workspace: e.Workspace, SessionID: e.SessionID,
		Priority: event.Internal, Summary: "nobody could be told of " + e.Type + " about " + e.Subject, Data: data}
	_, added, err := r.j.Append(ctx, fault)
	if err != nil {
		return err
	}
	if added {
		r.m.undeliverable.Inc()
	}
	return nil
}

// Ledger lists a shard's ledger as (event source, id) → recipient → inbox
// seq, deduplicated.
func Ledger(ctx context.Context, rdb redis.UniversalClient, j *journal.Journal, shard int) (map[string]map[string]string, error) {
	msgs, err := rdb.XRange(ctx, LedgerKey(j, shard), "-", "+").Result()
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]string{}
	for _, m := range msgs {
		k := fmt.Sprint(m.Values["source"]) + " " + fmt.Sprint(m.Values["id"])
		if out[k] == nil {
			out[k] = map[string]string{}
		}
		out[k][fmt.Sprint(m.Values["to"])] = fmt.Sprint(m.Values["inbox_seq"])
	}
	return out, nil
}
