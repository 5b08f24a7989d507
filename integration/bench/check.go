package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/route"
)

// Check is the delivery ledger and the journal read against what the
// tool sent and what its supervisors saw.
type Check struct {
	Sent       int `json:"sent"`       // facts acknowledged (2xx) by the gateway
	Journaled  int `json:"journaled"`  // of those, in the journal
	Expected   int `json:"expected"`   // (event, recipient) deliveries the routing rules call for
	Delivered  int `json:"delivered"`  // of those, in the delivery ledger exactly once
	Lost       int `json:"lost"`       // expected and not in the ledger (or a sent fact not journaled)
	Duplicated int `json:"duplicated"` // in the ledger more than once (distinct inbox seqs), or journaled twice
	Misrouted  int `json:"misrouted"`  // delivered to a party the rules do not name
	// Unchecked counts journaled events older than what a trimmed ledger
	// still holds (the ledger keeps about 100,000 records a shard).
	Unchecked int `json:"unchecked,omitempty"`
	// Reordered counts PR stories whose opened was derived after their
	// merge (a killed worker's derivation re-run late): they had no ready
	// to expect.
	Reordered int `json:"reordered,omitempty"`
	// Invariants are the invariants of docs/design.md §9 (and the PR tracker's
	// promises) read from state: each count must be 0.
	Invariants []Invariant `json:"invariants,omitempty"`
	// Examples name a few of each problem.
	Examples []string `json:"examples,omitempty"`
}

// Invariant is one invariant read from state: what breaks it, counted.
type Invariant struct {
	Name    string `json:"name"`
	Count   int    `json:"count"`
	Example string `json:"example,omitempty"`
}

func (c *Check) String() string {
	s := fmt.Sprintf("ledger check: %d facts sent, %d journaled; %d deliveries expected, %d delivered once; lost %d, duplicated %d, misrouted %d",
		c.Sent, c.Journaled, c.Expected, c.Delivered, c.Lost, c.Duplicated, c.Misrouted)
	if c.Unchecked > 0 {
		s += fmt.Sprintf(" (%d older events not checked: the ledger was trimmed)", c.Unchecked)
	}
	if c.Reordered > 0 {
		s += fmt.Sprintf("\n  %d PR stories had their opened derived after their merge (re-run after a worker kill): no ready was due", c.Reordered)
	}
	for _, inv := range c.Invariants {
		s += fmt.Sprintf("\n  %-68s %d", inv.Name, inv.Count)
		if inv.Example != "" {
			s += "  e.g. " + inv.Example
		}
	}
	for _, e := range c.Examples {
		s += "\n  " + e
	}
	return s
}

// OK says nothing was lost, duplicated or misrouted.
func (c *Check) OK() bool { return c.Lost == 0 && c.Duplicated == 0 && c.Misrouted == 0 }

func (c *Check) example(format string, args ...any) {
	if len(c.Examples) < 12 {
		c.Examples = append(c.Examples, fmt.Sprintf(format, args...))
	}
}

// factKey is how an event is identified (docs/design.md §2): (source, id).
type factKey struct{ source, id string }

// journaled is what the check keeps of one journal entry.
type journaled struct {
	n     int    // times journaled
	seq   string // of the first
	shard int
	to    []string // recipients the routing rules name
}

// journalView is the journal read once: events by key, and what the
// invariants need.
type journalView struct {
	events  map[factKey]*journaled
	byGUID  map[string]int            // delivery GUID → events whose id it prefixes
	ready   map[string]int            // "<subject> <head>" → ready events
	closed  map[string]int            // subject → closed events
	seqOf   map[string]string         // "<type> <subject>" → seq, of opened and closed
	session map[string]map[string]int // PR subject → sessionid of its github events → count
	faults  []string                  // undeliverable faults, by subject
	linkErr []string                  // link conflicts
}

// check reads the journal and the delivery ledger and compares them
// with what was sent and with the routing rules (docs/design.md §5) applied to
// the fleet's supervision: every worker session is controlled by the
// supervisor that spawned it, nobody else watches anything.
func (f *fleet) check(ctx context.Context) (*Check, error) {
	jv, err := f.readJournal(ctx)
	if err != nil {
		return nil, err
	}
	c := &Check{}
	f.checkSent(c, jv)
	if err := f.checkLedger(ctx, c, jv); err != nil {
		return nil, err
	}
	f.checkStories(c, jv)
	if err := f.checkCoverage(ctx, c); err != nil {
		return nil, err
	}
	f.checkInboxes(c)
	return c, nil
}

// recipients is who the routing rules (docs/design.md §5) make hear e in the
// fleet: the people of the push side whose subscriptions match it; and
// a message's target, else the effective controller of e's session —
// the supervisor that spawned it; never the party that caused it, nor
// the subject session itself (the fleet has no observers). wakegate.*
// and internal events are never routed.
func (f *fleet) recipients(e *event.Event) []string {
	if strings.HasPrefix(e.Type, "wakegate.") || e.Priority == event.Internal {
		return nil
	}
	subs := f.people.hears(e)
	if e.SessionID == "" {
		return subs
	}
	to := ""
	if e.Type == event.TypeMessageSent {
		to = event.SessionSubject(e.SessionID)
	} else if sup := f.controllerOf(e.SessionID); sup != "" && sup != event.SessionSubject(e.SessionID) {
		to = sup
	}
	if to == "" || to == causer(e) || slices.Contains(subs, to) {
		return subs
	}
	return append(subs, to)
}

// controllerOf is the supervisor a worker session was spawned under.
func (f *fleet) controllerOf(session string) string {
	k, ok := strings.CutPrefix(session, "w-")
	if !ok {
		return ""
	}
	n, err := strconv.Atoi(k)
	if err != nil || n < 0 || n >= len(f.members) || f.members[n].id != session {
		return ""
	}
	return f.members[n].sup
}

// causer is the party that caused e (docs/design.md §5: a sender never hears its
// own event): a message's data.source, else an agent source's party.
func causer(e *event.Event) string {
	if e.Type == event.TypeMessageSent {
		var d struct {
			Source string `json:"source"`
		}
		if json.Unmarshal(e.Data, &d) == nil && d.Source != "" {
			return d.Source
		}
	}
	p, _ := strings.CutPrefix(e.Source, "//wakegate/"+e.Workspace+"/")
	if p == e.Source {
		return ""
	}
	return p
}

// readJournal reads every shard of the journal.
func (f *fleet) readJournal(ctx context.Context) (*journalView, error) {
	jv := &journalView{events: map[factKey]*journaled{}, byGUID: map[string]int{}, ready: map[string]int{},
		closed: map[string]int{}, seqOf: map[string]string{}, session: map[string]map[string]int{}}
	guids := map[string]bool{}
	for _, s := range f.sent.facts {
		if s.guid != "" {
			guids[s.guid] = true
		}
	}
	j := f.sys.journal()
	for shard := range shards {
		err := scanStream(ctx, f.sys.Redis, j.StreamKey(shard), func(m redis.XMessage) error {
			e, err := journal.Decode(shard, m)
			if err != nil {
				return err
			}
			jv.add(shard, e, f.recipients(e), guids)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("read journal shard %d: %w", shard, err)
		}
	}
	return jv, nil
}

func (jv *journalView) add(shard int, e *event.Event, to []string, guids map[string]bool) {
	k := factKey{e.Source, e.ID}
	if got := jv.events[k]; got != nil {
		got.n++
	} else {
		jv.events[k] = &journaled{n: 1, seq: e.Seq, shard: shard, to: to}
	}
	if g, _, _ := strings.Cut(e.ID, "/"); guids[g] {
		jv.byGUID[g]++
	}
	var d struct {
		Head string `json:"head"`
	}
	switch e.Type {
	case event.TypeGitHubPullRequestReady:
		_ = json.Unmarshal(e.Data, &d)
		jv.ready[e.Subject+" "+d.Head]++
	case event.TypeGitHubPullRequestClosed:
		jv.closed[e.Subject]++
		jv.seqOf[e.Type+" "+e.Subject] = e.Seq
	case event.TypeGitHubPullRequestOpened:
		jv.seqOf[e.Type+" "+e.Subject] = e.Seq
	case event.TypeWakegateFaultUndeliverable:
		jv.faults = append(jv.faults, e.Subject)
	case event.TypeWakegateLinkConflict:
		jv.linkErr = append(jv.linkErr, e.Subject)
	}
	if strings.HasPrefix(e.Type, "github.") {
		if jv.session[e.Subject] == nil {
			jv.session[e.Subject] = map[string]int{}
		}
		jv.session[e.Subject][e.SessionID]++
	}
}

// checkSent: every acknowledged fact is journaled exactly once; a
// webhook's GUID names no other event.
func (f *fleet) checkSent(c *Check, jv *journalView) {
	c.Sent = len(f.sent.facts)
	for _, s := range f.sent.facts {
		got := jv.events[factKey{s.source, s.id}]
		switch {
		case got == nil:
			c.Lost++
			c.example("lost: %s %s acknowledged and not journaled", s.source, s.id)
			continue
		case got.n > 1:
			c.Duplicated++
			c.example("duplicated: %s %s journaled %d times", s.source, s.id, got.n)
		}
		c.Journaled++
		if s.guid == "" {
			continue
		}
		want := 0
		if strings.HasPrefix(s.id, s.guid) {
			want = 1
		}
		if n := jv.byGUID[s.guid]; n > want {
			c.Duplicated++
			c.example("duplicated: delivery %s journaled as %d events, want %d", s.guid, n, want)
		}
	}
}

// checkLedger: every (event, recipient) the rules name is in the ledger
// under exactly one inbox seq, nothing else is, and no two events share
// one recipient's inbox seq.
func (f *fleet) checkLedger(ctx context.Context, c *Check, jv *journalView) error {
	j := f.sys.journal()
	got := map[factKey]map[string]map[string]bool{} // event → recipient → inbox seqs
	from := map[int]string{}                        // shard → seq of the oldest event a trimmed ledger holds
	for shard := range shards {
		key := route.LedgerKey(j, shard)
		n, err := f.sys.Redis.XLen(ctx, key).Result()
		if err != nil {
			return fmt.Errorf("ledger shard %d: %w", shard, err)
		}
		first := true
		err = scanStream(ctx, f.sys.Redis, key, func(m redis.XMessage) error {
			v := func(k string) string { s, _ := m.Values[k].(string); return s }
			if first && n >= route.LedgerLen*9/10 {
				from[shard] = v("seq")
			}
			first = false
			k := factKey{v("source"), v("id")}
			if got[k] == nil {
				got[k] = map[string]map[string]bool{}
			}
			if got[k][v("to")] == nil {
				got[k][v("to")] = map[string]bool{}
			}
			got[k][v("to")][v("inbox_seq")] = true
			return nil
		})
		if err != nil {
			return fmt.Errorf("read ledger shard %d: %w", shard, err)
		}
	}
	for k, e := range jv.events {
		if old, ok := from[e.shard]; ok && seqBefore(e.seq, old) {
			c.Unchecked++
			continue
		}
		for _, to := range e.to {
			c.Expected++
			switch seqs := got[k][to]; {
			case len(seqs) == 0:
				c.Lost++
				c.example("lost: %s %s not delivered to %s", k.source, k.id, to)
			case len(seqs) > 1:
				c.Duplicated++
				c.example("duplicated: %s %s delivered to %s at inbox seqs %v", k.source, k.id, to, keys(seqs))
			default:
				c.Delivered++
			}
		}
	}
	bySeq := map[string]factKey{} // "<recipient> <inbox seq>" → event
	for k, rec := range got {
		e := jv.events[k]
		for to, seqs := range rec {
			if e == nil || !slices.Contains(e.to, to) {
				c.Misrouted++
				c.example("misrouted: %s %s delivered to %s (rules name %v)", k.source, k.id, to, recipientsOf(e))
			}
			for s := range seqs {
				if other, dup := bySeq[to+" "+s]; dup && other != k {
					c.Duplicated++
					c.example("duplicated: %s inbox seq %s holds both %s and %s", to, s, other.id, k.id)
				}
				bySeq[to+" "+s] = k
			}
		}
	}
	return nil
}

func recipientsOf(e *journaled) []string {
	if e == nil {
		return []string{"nobody: not journaled"}
	}
	return e.to
}

// checkStories: the PR tracker's promises about each story — one ready
// per head sha, one closed per merge, and every event about a linked PR
// carrying its author's session (docs/design.md §3) — and invariant I2 (docs/design.md §9)'s "nobody
// could hear it is a fault": none here, every session is supervised.
func (f *fleet) checkStories(c *Check, jv *journalView) {
	missingReady, extraReady, badClosed, unlinked := Invariant{Name: "stories whose head never became ready (opened, checks passed)"},
		Invariant{Name: "PR head shas with more than one ready"}, Invariant{Name: "merged PRs without exactly one closed"},
		Invariant{Name: "github events of a linked PR without its author's sessionid"}
	for _, st := range f.sent.stories {
		n := jv.ready[st.subject()+" "+st.sha]
		switch {
		case n > 0 || !st.accepted[stepOpened] || !st.accepted[stepSuite]:
		case jv.openedAfterClosed(st.subject()):
			// Its opened was derived after its merge — a killed worker's
			// derivation re-run after the rest of the repository's moved
			// on: the tracker never saw it open, so no ready was due.
			c.Reordered++
			f.wakes.forget(st.readyID())
		default:
			missingReady.add(st.subject() + " @" + st.sha[:7])
		}
		if n > 1 {
			extraReady.add(fmt.Sprintf("%s @%s: %d", st.subject(), st.sha[:7], n))
		}
		if st.accepted[stepMerged] && jv.closed[st.subject()] != 1 {
			badClosed.add(fmt.Sprintf("%s: %d", st.subject(), jv.closed[st.subject()]))
		}
		if !st.accepted[stepLink] {
			continue
		}
		for sid, k := range jv.session[st.subject()] {
			if sid != st.author.id {
				unlinked.addN(k, fmt.Sprintf("%s: sessionid %q, author %s", st.subject(), sid, st.author.id))
			}
		}
	}
	faults := Invariant{Name: "I2: undeliverable faults (events nobody could hear)"}
	for _, s := range jv.faults {
		faults.add(s)
	}
	conflicts := Invariant{Name: "link conflicts (a PR claimed twice)"}
	for _, s := range jv.linkErr {
		conflicts.add(s)
	}
	c.Invariants = append(c.Invariants, missingReady, extraReady, badClosed, unlinked, faults, conflicts)
}

// openedAfterClosed says whether a PR's opened was journaled after its
// closed (one repository's events share a shard: seqs compare).
func (jv *journalView) openedAfterClosed(subject string) bool {
	o, c := jv.seqOf["github.pull_request.opened "+subject], jv.seqOf["github.pull_request.closed "+subject]
	return o != "" && c != "" && seqBefore(c, o)
}

func (inv *Invariant) add(example string) { inv.addN(1, example) }

func (inv *Invariant) addN(n int, example string) {
	inv.Count += n
	if inv.Example == "" {
		inv.Example = example
	}
}

// checkCoverage is invariant and I4 I1 and I4 (docs/design.md §9) as the gateway resolves them: every
// worker session's effective controller is the supervisor that spawned
// it (GET /v1/sessions/{id}/supervision).
func (f *fleet) checkCoverage(ctx context.Context, c *Check) error {
	inv := Invariant{Name: "I1: sessions whose effective controller is not their supervisor"}
	var results = make([]string, len(f.members))
	err := parallel(ctx, len(f.members), 16, func(ctx context.Context, k int) error {
		m := f.members[k]
		var out struct {
			Effective struct {
				Party string `json:"party"`
			} `json:"effective_controller"`
		}
		if err := api(ctx, f.c, http.MethodGet, f.sys.Gateways[0]+"/v1/sessions/"+m.id+"/supervision", f.admin, nil, http.StatusOK, &out); err != nil {
			return fmt.Errorf("supervision of %s: %w", m.id, err)
		}
		if out.Effective.Party != m.sup {
			results[k] = fmt.Sprintf("%s: %q, want %s", m.id, out.Effective.Party, m.sup)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, r := range results {
		if r != "" {
			inv.add(r)
		}
	}
	c.Invariants = append(c.Invariants, inv)
	return nil
}

// checkInboxes is invariant I5 (docs/design.md §9) as the supervisors' long-polls saw it, and
// the expected wakes they never saw.
func (f *fleet) checkInboxes(c *Check) {
	t := f.wakes
	t.mu.Lock()
	for _, kind := range []string{"info entry woke its reader", "two unacked entries of one coalesce key"} {
		c.Invariants = append(c.Invariants, Invariant{Name: "I5: " + kind, Count: t.bad[kind], Example: t.ex[kind]})
	}
	t.mu.Unlock()
	for _, id := range t.unseen(3) {
		c.example("wake never seen by a long-poll: %s", id)
	}
}

// scanStream calls visit on every entry of a stream, in pages.
func scanStream(ctx context.Context, rdb redis.UniversalClient, key string, visit func(redis.XMessage) error) error {
	start := "-"
	for {
		msgs, err := rdb.XRangeN(ctx, key, start, "+", 5000).Result()
		if err != nil {
			return err
		}
		for _, m := range msgs {
			if err := visit(m); err != nil {
				return err
			}
		}
		if len(msgs) < 5000 {
			return nil
		}
		start = "(" + msgs[len(msgs)-1].ID
	}
}

// seqBefore says whether journal seq a ("<shard>-<ms>-<n>") is older
// than b of the same shard.
func seqBefore(a, b string) bool {
	_, ia, _ := strings.Cut(a, "-")
	_, ib, _ := strings.Cut(b, "-")
	ma, na := splitID(ia)
	mb, nb := splitID(ib)
	return ma < mb || (ma == mb && na < nb)
}

func splitID(id string) (ms, n int64) {
	a, b, _ := strings.Cut(id, "-")
	ms, _ = strconv.ParseInt(a, 10, 64)
	n, _ = strconv.ParseInt(b, 10, 64)
	return ms, n
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
