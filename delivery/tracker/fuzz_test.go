package tracker_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

// FuzzTracker drives pull request #1 of a fresh repository through a short
// sequence of facts decoded from the input (see decodeRun), applied through
// the real Tracker on real Redis, one by one (Apply) or in batches
// (ApplyBatch), with the settle clock advanced now and then (SettleDue). A
// small model of the PR that follows docs/design.md §3's rules, and nothing more,
// checks what the journal and the tracker say:
//
//   - no error but ErrInvalidFact, and that exactly for the invalid facts;
//   - at most one github.pull_request.ready and one checks_failed per head
//     sha, checks_failed critical exactly when that head had been ready;
//   - ready for a sha only while it is the head of the open, non-draft PR
//     with no standing changes_requested, its checks passed (the required
//     ones; with none required no run or status pending or failing there,
//     and with nothing reported at all only once the settle time has
//     passed since the sha first became head);
//   - checks_failed for a sha only while it is the head and a check there
//     failed;
//   - exactly one closed per close fact identity (its closed_at id);
//   - a check or status journaled once, under the PR when its payload names
//     it or its sha has been the PR's head, under the sha subject when no
//     snapshot or check payload ever tied the sha to the PR;
//   - after each Apply, batch or settle pass: ready journaled if the PR is
//     ready at its head, checks_failed if a check failed at the head of the
//     open PR; at the end the tracker's Ready and Failed shas match the
//     journal;
//   - re-applying a delivery under its own GUID appends nothing, whether
//     during the run (a redelivery) or, at the end, every delivery.
//
// "While" is the model right after the fact whose Apply journaled the
// event, or for a batch after one of its facts (the journal does not say
// which), or at a settle pass.
func FuzzTracker(f *testing.F) {
	for _, s := range trackerSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		r := newTrackerRun(t, input)
		for i, s := range r.steps {
			r.do(i, s)
		}
		r.flush()
		r.tick(2 * fuzzSettle) // every settle time has passed
		r.checkSettled()
		r.checkReapply()
	})
}

const fuzzSettle = 60 * time.Second

// maxFuzzSteps bounds the facts of one run.
const maxFuzzSteps = 24

// Operations of a step.
const (
	opOpened = iota
	opSynchronize
	opConvertedToDraft
	opReadyForReview
	opClosed
	opReopened
	opCheckRun
	opCheckSuite
	opStatus
	opReview
	opTick      // flush the batch, advance the clock, SettleDue
	opRedeliver // an earlier delivery again, under its GUID or a fresh one
	opInvalid   // a fact Apply refuses
	numOps
)

// opTable maps b0's low 4 bits to operations: checks, statuses and reviews,
// which a PR gets most of, twice.
var opTable = [16]int{opOpened, opSynchronize, opConvertedToDraft, opReadyForReview, opClosed, opReopened,
	opCheckRun, opCheckRun, opCheckSuite, opStatus, opStatus, opReview, opReview, opTick, opRedeliver, opInvalid}

var opNames = [numOps]string{"opened", "synchronize", "converted_to_draft", "ready_for_review", "closed",
	"reopened", "check_run", "check_suite", "status", "review", "tick", "redeliver", "invalid"}

var (
	fuzzShas     = [3]string{shaA, shaB, shaC}
	fuzzResults  = [4]string{github.ResultPass, github.ResultFail, github.ResultPending, github.ResultPass}
	fuzzReviews  = [4]string{"approved", "changes_requested", "commented", "dismissed"}
	requiredSets = [4][]string{nil, {"build"}, {"ci/jenkins"}, {"build", "ci/jenkins"}}
)

// The input: one configuration byte, then two bytes per step (at most
// maxFuzzSteps; the rest is ignored).
//
//	config  bits 0-1  required checks (requiredSets)
//	        bit 2     the final re-application goes through ApplyBatch
//	step b0 bits 0-3  operation (opTable)
//	        bit 4     batched: applied with the neighbouring batched steps
//	        bits 5-7  lag: the payload time is fuzzLags[lag] × 10 s older
//	step b1 bits 0-1  sha: fuzzShas[i], or 3: the head the PR's snapshots state
//	        bits 2-3  check result (fuzzResults)
//	        bit 4     variant: the second check name or reviewer, opened as
//	                  a draft (with bit 7), closed merged, a full settle tick
//	                  (else half), a redelivery under the same GUID (else a
//	                  fresh one)
//	        bits 5-6  review state (fuzzReviews)
//	        bit 7     the check's payload names the PR
//
// Redeliver picks delivery b1 mod the deliveries so far; invalid picks its
// kind by b1 mod 3.
const (
	cfgBatchReapply = 1 << 2

	stBatched = 1 << 4

	argFail        = 1 << 2
	argPending     = 2 << 2
	argAlt         = 1 << 4
	argChanges     = 1 << 5
	argCommented   = 2 << 5
	argDismissed   = 3 << 5
	argWithPR      = 1 << 7
	argB, argC     = 1, 2
	argShaA        = 0
	argPass        = 0
	argApproved    = 0
	argNoVariation = 0
)

// fuzzLags are the lags of step payload times, in steps of 10 s: half the
// facts are on time.
var fuzzLags = [8]int{0, 0, 0, 0, 1, 2, 4, 7}

// lag encodes a lag of n (one of fuzzLags) in a step's b0.
func lag(n int) byte { return byte(slices.Index(fuzzLags[:], n)) << 5 }

type fuzzStep struct {
	op      int
	batched bool
	lag     int
	sha     int // index in fuzzShas, 3 for the head
	result  string
	alt     bool
	review  string
	withPR  bool
	arg     byte
}

func (s fuzzStep) String() string {
	var b strings.Builder
	b.WriteString(opNames[s.op])
	switch s.op {
	case opSynchronize, opCheckRun, opCheckSuite, opStatus:
		if s.sha == len(fuzzShas) {
			b.WriteString(" @head")
		} else {
			fmt.Fprintf(&b, " @%.1s", fuzzShas[s.sha])
		}
	}
	switch s.op {
	case opCheckRun, opCheckSuite, opStatus:
		fmt.Fprintf(&b, " %s", s.result)
		if s.withPR {
			b.WriteString(" (names #1)")
		}
	case opOpened:
		if s.alt && s.withPR {
			b.WriteString(" draft")
		}
	case opReview:
		fmt.Fprintf(&b, " %s", s.review)
	case opRedeliver, opInvalid:
		fmt.Fprintf(&b, " %d", s.arg)
	}
	switch {
	case s.alt && s.op == opRedeliver:
		b.WriteString(" same GUID")
	case s.alt:
		b.WriteString(" alt")
	}
	if s.lag > 0 {
		fmt.Fprintf(&b, " lag %d", s.lag)
	}
	if s.batched {
		b.WriteString(" [batch]")
	}
	return b.String()
}

// decodeRun reads the configuration and the steps out of input.
func decodeRun(input []byte) (required []string, batchReapply bool, steps []fuzzStep) {
	if len(input) == 0 {
		return nil, false, nil
	}
	cfg, rest := input[0], input[1:]
	for len(rest) >= 2 && len(steps) < maxFuzzSteps {
		b0, b1 := rest[0], rest[1]
		rest = rest[2:]
		steps = append(steps, fuzzStep{
			op:      opTable[b0&0x0f],
			batched: b0&stBatched != 0,
			lag:     fuzzLags[b0>>5],
			sha:     int(b1 & 3),
			result:  fuzzResults[(b1>>2)&3],
			alt:     b1&argAlt != 0,
			review:  fuzzReviews[(b1>>5)&3],
			withPR:  b1&argWithPR != 0,
			arg:     b1,
		})
	}
	return requiredSets[cfg&3], cfg&cfgBatchReapply != 0, steps
}

// stamped is a value with the payload time that decides which is latest.
type stamped struct {
	v  string
	at time.Time
}

// prModel is PR #1 as docs/design.md §3 defines it, folded from the facts applied.
type prModel struct {
	seen        bool
	updated     time.Time // of the newest snapshot applied
	open, draft bool
	head        string
	headSince   time.Time                     // the tracker time head last changed
	firstHead   map[string]time.Time          // sha → the tracker time it first became head
	wasHead     map[string]bool               // shas that have been head
	tied        map[string]bool               // shas any snapshot (even a stale one) or check payload tied to the PR
	reviews     map[string]stamped            // reviewer → standing review
	checks      map[string]map[string]stamped // sha → check name → latest result
}

func (m *prModel) apply(f *github.Fact, now time.Time) {
	switch {
	case f.PR != nil:
		// Each snapshot carries the whole PR: an older one changes nothing.
		p := f.PR
		m.tied[p.Head] = true
		if m.seen && p.UpdatedAt.Before(m.updated) {
			return
		}
		m.seen, m.updated = true, p.UpdatedAt
		m.open, m.draft = p.State == "open", p.Draft
		m.wasHead[p.Head] = true
		if p.Head != m.head {
			m.head, m.headSince = p.Head, now
			if _, ok := m.firstHead[p.Head]; !ok {
				m.firstHead[p.Head] = now
			}
		}
	case f.Review != nil:
		// Per reviewer the latest of approved / changes_requested /
		// dismissed stands; commented overrides nothing.
		r := f.Review
		if r.State == "commented" {
			return
		}
		if cur, ok := m.reviews[r.Reviewer]; ok && cur.at.After(r.At) {
			return
		}
		m.reviews[r.Reviewer] = stamped{r.State, r.At}
	case f.Check != nil:
		// The latest result per name at its sha, by the payload's time.
		c := f.Check
		if slices.Contains(c.PRs, 1) {
			m.tied[c.SHA] = true
		}
		if m.checks[c.SHA] == nil {
			m.checks[c.SHA] = map[string]stamped{}
		}
		if cur, ok := m.checks[c.SHA][c.Name]; ok && cur.at.After(c.At) {
			return
		}
		m.checks[c.SHA][c.Name] = stamped{c.Result, c.At}
	}
}

// checkSubject is the subject a check or status fact must be journaled
// under, or "" when the design leaves it open.
func (m *prModel) checkSubject(repo string, c *github.CheckFact) string {
	switch {
	case slices.Contains(c.PRs, 1) || m.wasHead[c.SHA]:
		return event.PRSubject(repo, 1)
	case !m.tied[c.SHA]:
		return event.ShaSubject(repo, c.SHA)
	}
	return ""
}

func (m *prModel) changesRequested() bool {
	for _, r := range m.reviews {
		if r.v == "changes_requested" {
			return true
		}
	}
	return false
}

// mayBeReady reports whether the design allows ready for sha at now. With no
// required checks it does not hold a suite's result against it (a suite is
// only a trigger to re-evaluate), but counts one as reported.
func (m *prModel) mayBeReady(sha string, now time.Time, required []string) bool {
	if !m.open || m.draft || m.head != sha || m.changesRequested() {
		return false
	}
	res := m.checks[sha]
	if len(required) > 0 {
		for _, name := range required {
			if res[name].v != github.ResultPass {
				return false
			}
		}
		return true
	}
	if len(res) == 0 {
		return !now.Before(m.firstHead[sha].Add(fuzzSettle))
	}
	for name, r := range res {
		if !strings.HasPrefix(name, "suite:") && r.v != github.ResultPass {
			return false
		}
	}
	return true
}

// mustBeReady reports whether the PR is ready at its head at now: the
// required checks passed, or with none required everything reported at
// head (suites too) passed, or nothing was reported and the settle time
// has passed since the head last changed (the tracker's clock may start
// there, never later).
func (m *prModel) mustBeReady(now time.Time, required []string) bool {
	if !m.open || m.draft || m.changesRequested() {
		return false
	}
	if len(required) > 0 {
		return m.mayBeReady(m.head, now, required)
	}
	res := m.checks[m.head]
	if len(res) == 0 {
		return !now.Before(m.headSince.Add(fuzzSettle))
	}
	for _, r := range res {
		if r.v != github.ResultPass {
			return false
		}
	}
	return true
}

// failing reports whether a check's latest result at sha failed.
func (m *prModel) failing(sha string) bool {
	for _, r := range m.checks[sha] {
		if r.v == github.ResultFail {
			return true
		}
	}
	return false
}

func (m *prModel) String() string {
	var checks []string
	for _, sha := range slices.Sorted(maps.Keys(m.checks)) {
		for _, name := range slices.Sorted(maps.Keys(m.checks[sha])) {
			checks = append(checks, fmt.Sprintf("%.1s/%s=%s", sha, name, m.checks[sha][name].v))
		}
	}
	var reviews []string
	for _, who := range slices.Sorted(maps.Keys(m.reviews)) {
		reviews = append(reviews, who+"="+m.reviews[who].v)
	}
	return fmt.Sprintf("seen %v open %v draft %v head %.1s checks %v reviews %v",
		m.seen, m.open, m.draft, m.head, checks, reviews)
}

// moment is what the model allows right after one fact (or a settle pass).
type moment struct {
	ready, failing [3]bool // per fuzzShas
}

type fuzzDelivery struct {
	guid    string
	fact    *github.Fact
	invalid bool
	again   bool // a redelivery under the GUID of an earlier one
}

type trackerRun struct {
	*env
	required     []string
	batchReapply bool
	steps        []fuzzStep

	m  prModel
	gh struct { // the PR as the next snapshot states it
		open, draft bool
		head        string
	}
	deliveries []fuzzDelivery
	batch      []fuzzDelivery
	moments    []moment // the model after each fact of the pending batch

	cursor        journal.Cursor
	story         []string          // what happened so far, for failure messages
	ready         map[string]bool   // head shas ready was journaled for
	failed        map[string]bool   // head shas checks_failed was journaled for
	closed        map[string]int    // closed events by id
	closeIDs      map[string]bool   // ids of the close facts applied
	checkSubjects map[string]string // check deliveries to journal (by GUID) → checkSubject
	checkEvents   map[string]int    // their events journaled
}

func newTrackerRun(t *testing.T, input []byte) *trackerRun {
	required, batchReapply, steps := decodeRun(input)
	cfg := tracker.Config{Settle: fuzzSettle}
	if required != nil {
		cfg.Required = func(string, string) []string { return required }
	}
	e := newEnv(t, cfg)
	cursor, err := journal.ParseCursor("", e.j.Config().Shards)
	if err != nil {
		t.Fatal(err)
	}
	r := &trackerRun{
		env: e, required: required, batchReapply: batchReapply, steps: steps, cursor: cursor,
		m: prModel{
			firstHead: map[string]time.Time{}, wasHead: map[string]bool{}, tied: map[string]bool{},
			reviews: map[string]stamped{}, checks: map[string]map[string]stamped{},
		},
		ready: map[string]bool{}, failed: map[string]bool{}, closed: map[string]int{}, closeIDs: map[string]bool{},
		checkSubjects: map[string]string{}, checkEvents: map[string]int{},
		story: []string{fmt.Sprintf("required %v", required)},
	}
	r.gh.open, r.gh.head = true, shaA
	return r
}

// fatalf fails the run, telling what happened.
func (r *trackerRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s\nsteps:\n  %s\nmodel: %s", fmt.Sprintf(format, args...), strings.Join(r.story, "\n  "), &r.m)
}

func (r *trackerRun) do(i int, s fuzzStep) {
	r.story = append(r.story, fmt.Sprintf("%d: %s", i, s))
	switch s.op {
	case opTick:
		r.flush()
		if s.alt {
			r.tick(fuzzSettle)
		} else {
			r.tick(fuzzSettle / 2)
		}
	case opRedeliver:
		if len(r.deliveries) > 0 {
			k := int(s.arg) % len(r.deliveries)
			r.story[len(r.story)-1] += fmt.Sprintf(" (delivery %d)", k)
			d := r.deliveries[k]
			d.again = s.alt
			if !d.again {
				d.guid = newGUID()
			}
			r.deliver(d, s.batched)
		}
	default:
		r.deliver(fuzzDelivery{guid: newGUID(), fact: r.fact(i, s), invalid: s.op == opInvalid}, s.batched)
	}
}

// fact builds step i's fact. Payload times are unique per step (the step
// in the milliseconds), so "latest" is never a tie.
func (r *trackerRun) fact(i int, s fuzzStep) *github.Fact {
	when := at(10 * (i - s.lag)).Add(time.Duration(i+1) * time.Millisecond)
	var prs []int
	if s.withPR {
		prs = []int{1}
	}
	sha := r.gh.head
	if s.sha < len(fuzzShas) {
		sha = fuzzShas[s.sha]
	}
	pick := func(a, b string) string {
		if s.alt {
			return b
		}
		return a
	}
	switch s.op {
	case opOpened:
		r.gh.open, r.gh.draft, r.gh.head = true, s.alt && s.withPR, sha
	case opSynchronize:
		r.gh.head = sha
	case opConvertedToDraft:
		r.gh.draft = true
	case opReadyForReview:
		r.gh.draft = false
	case opClosed:
		r.gh.open = false
	case opReopened:
		r.gh.open = true
	case opCheckRun:
		return r.check("check_run", sha, pick("build", "lint"), s.result, when, prs...)
	case opCheckSuite:
		return r.check("check_suite", sha, pick("1", "2"), s.result, when, prs...)
	case opStatus:
		return r.check("status", sha, pick("ci/jenkins", "ci/lint"), s.result, when, prs...)
	case opReview:
		return r.review(1, pick("alice", "bob"), s.review, when)
	case opInvalid:
		switch s.arg % 3 {
		case 0:
			return r.run(sha, "build", "maybe", when, 1)
		case 1:
			return r.review(1, "", "approved", when)
		default:
			f := r.pr("edited", 1, sha, when)
			f.Data = json.RawMessage(`{"nope`)
			return f
		}
	}
	return r.pr(opNames[s.op], 1, r.gh.head, when, func(p *github.PRFact) {
		p.Draft = r.gh.draft
		p.Merged = s.op == opClosed && s.alt
		if !r.gh.open {
			p.State = "closed"
		}
	})
}

// deliver applies d now (Apply), or adds it to the batch.
func (r *trackerRun) deliver(d fuzzDelivery, batched bool) {
	if !batched {
		r.flush()
	}
	r.deliveries = append(r.deliveries, d)
	if c := d.fact.Check; c != nil && d.fact.Type != "" && !d.invalid && !d.again {
		r.checkSubjects[d.guid] = r.m.checkSubject(r.repo, c)
	}
	if !d.invalid {
		r.m.apply(d.fact, r.now)
		if d.fact.PR != nil && d.fact.PR.State == "closed" && d.fact.ID != "" {
			r.closeIDs[d.fact.ID] = true
		}
	}
	if batched {
		r.batch = append(r.batch, d)
		r.moments = append(r.moments, r.moment())
		return
	}
	res, err := r.tr.Apply(r.ctx, r.ws, d.guid, d.fact, r.now)
	r.checkErr(d, err)
	if n := r.checkNew(r.moment()); n != len(res.Seqs) {
		r.fatalf("Apply reported %d seqs, the journal grew by %d", len(res.Seqs), n)
	}
	if d.again && len(res.Seqs) > 0 {
		r.fatalf("a redelivery under its own GUID appended %v", res.Seqs)
	}
	r.checkDue()
}

// flush applies the batch (ApplyBatch).
func (r *trackerRun) flush() {
	if len(r.batch) == 0 {
		return
	}
	items := make([]tracker.Item, len(r.batch))
	for i, d := range r.batch {
		items[i] = tracker.Item{Workspace: r.ws, GUID: d.guid, Fact: d.fact}
	}
	for i, err := range r.tr.ApplyBatch(r.ctx, items, r.now) {
		r.checkErr(r.batch[i], err)
	}
	r.checkNew(r.moments...)
	r.batch, r.moments = nil, nil
	r.checkDue()
}

// tick advances the clock by d and runs a settle pass.
func (r *trackerRun) tick(d time.Duration) {
	r.now = r.now.Add(d)
	if _, err := r.tr.SettleDue(r.ctx, r.now); err != nil {
		r.fatalf("SettleDue: %v", err)
	}
	r.checkNew(r.moment())
	r.checkDue()
}

func (r *trackerRun) moment() moment {
	var mo moment
	for i, sha := range fuzzShas {
		mo.ready[i] = r.m.mayBeReady(sha, r.now, r.required)
		mo.failing[i] = r.m.head == sha && r.m.failing(sha)
	}
	return mo
}

func (r *trackerRun) checkErr(d fuzzDelivery, err error) {
	r.t.Helper()
	switch {
	case d.invalid && !errors.Is(err, tracker.ErrInvalidFact):
		r.fatalf("invalid fact %s.%s: err %v, want ErrInvalidFact", d.fact.Event, d.fact.Action, err)
	case !d.invalid && err != nil:
		r.fatalf("%s.%s: %v", d.fact.Event, d.fact.Action, err)
	}
}

// readNew returns the events journaled since the last call. The run's
// journal (its own key prefix) holds only r.ws's events, so a read short of
// the limit has reached the end: one round trip, not readAll's two.
func (r *trackerRun) readNew() []*event.Event {
	const limit = 1000
	var out []*event.Event
	for {
		evs, next, err := r.j.Read(r.ctx, r.cursor, journal.Filter{Workspace: r.ws}, limit)
		if err != nil {
			r.fatalf("journal read: %v", err)
		}
		out = append(out, evs...)
		r.cursor = next
		if len(evs) < limit {
			return out
		}
	}
}

// checkNew checks the events journaled by one Apply, ApplyBatch or settle
// pass against what the model allowed after each of its facts, and returns
// how many there were.
func (r *trackerRun) checkNew(moments ...moment) int {
	r.t.Helper()
	evs := r.readNew()
	for _, ev := range evs {
		r.story = append(r.story, fmt.Sprintf("   → %s %s", ev.Type, ev.ID))
	}
	for _, ev := range evs {
		switch ev.Type {
		case "github.pull_request.ready", "github.pull_request.checks_failed":
			r.checkSynth(ev, moments)
		case "github.check_run.completed", "github.check_suite.completed", "github.status":
			r.checkCheckEvent(ev)
		case "github.pull_request.closed":
			if !r.closeIDs[ev.ID] {
				r.fatalf("closed %s: no such close fact applied", ev.ID)
			}
			if r.closed[ev.ID]++; r.closed[ev.ID] > 1 {
				r.fatalf("closed %s journaled %d times", ev.ID, r.closed[ev.ID])
			}
		}
	}
	return len(evs)
}

func (r *trackerRun) checkSynth(ev *event.Event, moments []moment) {
	r.t.Helper()
	var d struct {
		Number int    `json:"number"`
		Head   string `json:"head"`
	}
	if err := json.Unmarshal(ev.Data, &d); err != nil {
		r.fatalf("%s data %s: %v", ev.Type, ev.Data, err)
	}
	what := strings.TrimPrefix(ev.Type, "github.pull_request.")
	sha := slices.Index(fuzzShas[:], d.Head)
	if d.Number != 1 || sha < 0 || ev.ID != "pr/1/"+what+"/"+d.Head || ev.Subject != event.PRSubject(r.repo, 1) {
		r.fatalf("%s id %s subject %s data %s", ev.Type, ev.ID, ev.Subject, ev.Data)
	}
	allowed := false
	switch what {
	case "ready":
		if r.ready[d.Head] {
			r.fatalf("a second ready for %.1s", d.Head)
		}
		for _, mo := range moments {
			allowed = allowed || mo.ready[sha]
		}
		if !allowed {
			r.fatalf("ready for %.1s, which the model says is not ready", d.Head)
		}
		r.ready[d.Head] = true
	case "checks_failed":
		if r.failed[d.Head] {
			r.fatalf("a second checks_failed for %.1s", d.Head)
		}
		for _, mo := range moments {
			allowed = allowed || mo.failing[sha]
		}
		if !allowed {
			r.fatalf("checks_failed for %.1s, which the model says is not a failing head", d.Head)
		}
		want := event.Attention
		if r.ready[d.Head] {
			want = event.Critical
		}
		if ev.Priority != want {
			r.fatalf("checks_failed for %.1s: priority %s, want %s (ready before: %v)", d.Head, ev.Priority, want, r.ready[d.Head])
		}
		r.failed[d.Head] = true
	}
}

// checkDue checks, after each Apply, ApplyBatch or settle pass, that what
// the model says must have happened by now was journaled: ready when the
// PR is ready at its head, checks_failed when a check failed at the head
// of the open PR.
func (r *trackerRun) checkDue() {
	r.t.Helper()
	if r.m.mustBeReady(r.now, r.required) && !r.ready[r.m.head] {
		r.fatalf("ready at head %.1s, but no ready journaled", r.m.head)
	}
	if r.m.open && r.m.failing(r.m.head) && !r.failed[r.m.head] {
		r.fatalf("a check failed at head %.1s of the open PR, but no checks_failed journaled", r.m.head)
	}
}

// checkCheckEvent checks the subject and id of a check's or status's own
// event.
func (r *trackerRun) checkCheckEvent(ev *event.Event) {
	r.t.Helper()
	guid, n, _ := strings.Cut(ev.ID, "/")
	want, ok := r.checkSubjects[guid]
	switch {
	case !ok:
		r.fatalf("%s %s: no such check delivery", ev.Type, ev.ID)
	case want != "" && ev.Subject != want:
		r.fatalf("%s %s: subject %s, want %s", ev.Type, ev.ID, ev.Subject, want)
	case ev.Subject == event.PRSubject(r.repo, 1) && n != "1",
		ev.Subject != event.PRSubject(r.repo, 1) && (n != "" || !strings.HasPrefix(ev.Subject, event.ShaSubject(r.repo, ""))):
		r.fatalf("%s %s: subject %s", ev.Type, ev.ID, ev.Subject)
	}
	if r.checkEvents[guid]++; r.checkEvents[guid] > 1 {
		r.fatalf("check delivery %s journaled %d times", guid, r.checkEvents[guid])
	}
}

// checkSettled checks, at the end, that every close fact and check
// delivery was journaled once and that the tracker's state agrees with the
// journal.
func (r *trackerRun) checkSettled() {
	r.t.Helper()
	for id := range r.closeIDs {
		if r.closed[id] != 1 {
			r.fatalf("close fact %s: %d closed events, want 1", id, r.closed[id])
		}
	}
	for guid := range r.checkSubjects {
		if r.checkEvents[guid] != 1 {
			r.fatalf("check delivery %s: %d events, want 1", guid, r.checkEvents[guid])
		}
	}
	s := r.state(1)
	if got, want := s.Ready, slices.Sorted(maps.Keys(r.ready)); !slices.Equal(got, want) {
		r.fatalf("tracker state ready %v, journal %v", got, want)
	}
	if got, want := s.Failed, slices.Sorted(maps.Keys(r.failed)); !slices.Equal(got, want) {
		r.fatalf("tracker state failed %v, journal %v", got, want)
	}
}

// checkReapply re-applies every delivery under its own GUID: nothing may be
// appended.
func (r *trackerRun) checkReapply() {
	r.t.Helper()
	r.story = append(r.story, fmt.Sprintf("re-apply all (batch %v)", r.batchReapply))
	if r.batchReapply {
		items := make([]tracker.Item, len(r.deliveries))
		for i, d := range r.deliveries {
			items[i] = tracker.Item{Workspace: r.ws, GUID: d.guid, Fact: d.fact}
		}
		for i, err := range r.tr.ApplyBatch(r.ctx, items, r.now) {
			r.checkErr(r.deliveries[i], err)
		}
	} else {
		for _, d := range r.deliveries {
			res, err := r.tr.Apply(r.ctx, r.ws, d.guid, d.fact, r.now)
			r.checkErr(d, err)
			if len(res.Seqs) > 0 {
				r.fatalf("re-applying %s %s appended %v", d.fact.Event, d.guid, res.Seqs)
			}
		}
	}
	if evs := r.readNew(); len(evs) > 0 {
		r.fatalf("re-applying every delivery appended %v", ids(evs))
	}
}

// seedRun encodes a configuration and steps (pairs of bytes) as an input.
func seedRun(cfg byte, steps ...[2]byte) []byte {
	out := []byte{cfg}
	for _, s := range steps {
		out = append(out, s[0], s[1])
	}
	return out
}

// st encodes a step: op, b0's flags (stBatched, lag) and b1.
func st(op int, b0 byte, b1 byte) [2]byte {
	return [2]byte{byte(slices.Index(opTable[:], op)) | b0, b1}
}

func trackerSeeds() [][]byte {
	const none, build, jenkins, both = 0, 1, 2, 3
	return [][]byte{
		// CI passes, a push, the new head fails and is re-run, merged, the
		// close redelivered.
		seedRun(none,
			st(opOpened, 0, argShaA),
			st(opCheckRun, 0, argShaA|argPass|argWithPR),
			st(opSynchronize, 0, argB),
			st(opCheckRun, 0, argB|argFail|argWithPR),
			st(opCheckRun, 0, argB|argPass|argWithPR),
			st(opClosed, 0, argAlt),
			st(opRedeliver, 0, 5),
			st(opRedeliver, 0, argAlt)), // the synchronize, same GUID
		// A draft with the required check passed becomes ready on
		// ready_for_review; another check fails afterwards: critical.
		seedRun(build,
			st(opOpened, 0, argShaA|argAlt|argWithPR),
			st(opCheckRun, 0, argShaA|argPass),
			st(opReadyForReview, 0, argNoVariation),
			st(opCheckRun, 0, argShaA|argFail|argAlt|argWithPR),
			st(opConvertedToDraft, 0, argNoVariation)),
		// Changes requested block; a comment does not clear, a dismissal
		// does; another reviewer's approval in between changes nothing.
		seedRun(jenkins|cfgBatchReapply,
			st(opOpened, 0, argShaA),
			st(opReview, 0, argChanges),
			st(opStatus, 0, argShaA|argPass),
			st(opReview, 0, argCommented),
			st(opReview, 0, argAlt|argApproved),
			st(opReview, 0, argDismissed),
			st(opSynchronize, 0, argC),
			st(opReview, 0, argAlt|argChanges),
			st(opStatus, 0, argC|argPass)),
		// No CI: ready only once the settle time has passed; a push
		// restarts the clock; a suite reported elsewhere.
		seedRun(none,
			st(opOpened, 0, argShaA),
			st(opTick, 0, argNoVariation),
			st(opTick, 0, argAlt),
			st(opSynchronize, 0, argB),
			st(opCheckSuite, 0, argC|argFail),
			st(opTick, 0, argNoVariation),
			st(opSynchronize, 0, argC),
			st(opTick, 0, argAlt)),
		// Everything batched: results before the push that makes their sha
		// head, an invalid fact in the middle, closed and reopened.
		seedRun(both,
			st(opOpened, stBatched, argShaA),
			st(opStatus, stBatched, argB|argPass),
			st(opCheckRun, stBatched, argB|argPass),
			st(opInvalid, stBatched, 0),
			st(opSynchronize, stBatched, argB),
			st(opClosed, stBatched, argNoVariation),
			st(opCheckRun, stBatched, argB|argFail|argAlt|argWithPR),
			st(opReopened, stBatched, argNoVariation),
			st(opInvalid, 0, 2)),
		// Late deliveries: an older failure after a newer pass, an older
		// draft snapshot after ready_for_review, an older approval after
		// changes requested.
		seedRun(build|cfgBatchReapply,
			st(opOpened, 0, argShaA|argAlt|argWithPR),
			st(opReadyForReview, 0, argNoVariation),
			st(opConvertedToDraft, lag(4), argNoVariation),
			st(opCheckRun, 0, argShaA|argPass|argWithPR),
			st(opCheckRun, lag(2), argShaA|argFail|argWithPR),
			st(opReview, 0, argAlt|argChanges),
			st(opReview, lag(7), argAlt|argApproved),
			st(opInvalid, 0, 1),
			st(opRedeliver, stBatched, 3),
			st(opRedeliver, stBatched, 1)),
		// No required checks: one reviewer's changes requested outweigh
		// another's approval and carry over to a push; CI passes, but for
		// a pending run at the new head.
		seedRun(none,
			st(opOpened, 0, argShaA),
			st(opReview, 0, argChanges),
			st(opReview, 0, argAlt|argApproved),
			st(opCheckRun, 0, argShaA|argPass|argWithPR),
			st(opSynchronize, 0, argB),
			st(opStatus, 0, argB|argPass),
			st(opCheckRun, 0, argB|argPending|argAlt|argWithPR),
			st(opTick, 0, argAlt)),
	}
}
