package bench

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/wakegate/wakegate/providers/event"
)

func init() {
	scenarios["fleet"] = &scenario{
		about: "--sessions agent sessions under --supervisors supervisors working on --prs PRs: agent pushes and signed GitHub PR stories, mixed, open loop at --rate; supervisors long-poll and ack; fact → wake latency; a push side (people with push endpoints watching sessions that end turns in bursts: pushes per decided wake, nothing left unacked after the drain); the journal and delivery ledger checked against what was sent",
		defaults: Options{Duration: 60 * time.Second, Warmup: 3 * time.Second, Rate: 600, Conns: 64,
			Sessions: 1000, PRs: 200, Supervisors: 50},
		run: func(ctx context.Context, r *runner) error { return runFleet(ctx, r, nil) },
	}
}

// fleetTarget is the sustained rate for fleet.
const fleetTarget = 600

// runFleet measures the baseline, sets the fleet up through the API,
// drives its load (during which during, when set, runs), waits for the
// workers to catch up and checks the ledger.
func runFleet(ctx context.Context, r *runner, during func(ctx context.Context, sys *System)) error {
	sys, err := r.start(ctx)
	if err != nil {
		return err
	}
	defer sys.Stop()
	// The bare handler's throughput, at most 20 s: a figure, not a soak.
	bl, err := r.baseline(ctx, sys, Loop{Name: "baseline, closed loop", Conns: r.o.Conns, Duration: min(r.o.Duration, 20*time.Second),
		Warmup: min(r.o.Warmup, 3*time.Second)})
	if err != nil {
		return err
	}
	f := newFleet(r.o, sys)
	defer f.c.CloseIdleConnections()
	defer f.people.stop()
	if err := f.setup(ctx); err != nil {
		return fmt.Errorf("set the fleet up: %w", err)
	}
	// The baseline's bodies (hundreds of MB of XADDs to a capped stream)
	// would bring the AOF's first rewrite into the load's first minute.
	if err := rewriteAOF(ctx, sys.Redis, 2*time.Minute); err != nil {
		return err
	}
	sups := startSupervisors(ctx, f)

	stop := func() {}
	if during != nil {
		dctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); during(dctx, sys) }()
		stop = func() { cancel(); <-done }
	}
	l := Loop{Name: "fleet, open loop", Rate: r.o.Rate, Conns: max(r.o.Conns, 256), Duration: r.o.Duration, Warmup: r.o.Warmup, Do: f.do}
	lags := sampleLag(ctx, sys)
	bctx, stopBursts := context.WithCancel(ctx)
	burstsDone := make(chan struct{})
	go func() { defer close(burstsDone); f.bursts(bctx) }()
	nodes0, nodesErr := RedisNodes(ctx, sys.Redis)
	aof0 := persistence(ctx, sys.Redis)
	cs0, _ := commandStats(ctx, sys.Redis)
	// the last 300,000 commands of the load (a few seconds of it)
	slow := startSlowLog(ctx, r, sys, 300000)
	res := r.measure(ctx, sys, l, false)
	if slow {
		r.note("Redis's time by script in the last commands of the load (SLOWLOG, µs per request as if the window were the whole load: read the shares): %s",
			scriptSplit(ctx, sys.Redis, res.N))
		_ = sys.Redis.ConfigSet(ctx, "slowlog-log-slower-than", "10000").Err()
	}
	if cs1, err := commandStats(ctx, sys.Redis); err == nil && cs0 != nil && res.N > 0 {
		r.note("Redis commands per request during the load (INFO commandstats: µs, calls; a script's commands count in it and on their own): %s",
			commandSplit(cs0, cs1, res.N))
	}
	if aof := persistence(ctx, sys.Redis); aof != nil && aof0 != nil && res.N > 0 {
		growth := "its growth per request unknown (rewritten)" // a rewrite restarts the size
		if aof["aof_rewrites"] == aof0["aof_rewrites"] {
			growth = fmt.Sprintf("%d B per request", (aof["aof_current_size"]-aof0["aof_current_size"])/res.N)
		}
		r.note("Redis's AOF during the load: %s, %d MB at the end, %d rewrites (the last %d s, its fork %d µs), %d fsyncs delayed",
			growth, aof["aof_current_size"]>>20, aof["aof_rewrites"]-aof0["aof_rewrites"], aof["aof_last_rewrite_time_sec"],
			aof["latest_fork_usec"], aof["aof_delayed_fsync"]-aof0["aof_delayed_fsync"])
	}
	stopBursts()
	<-burstsDone
	if sys.Cluster {
		nodeRows(ctx, r, sys, "fleet", nodes0, nodesErr)
	}
	smp := lags()
	worst := smp.worst
	stop()
	r.note("worst lag read once a second during the load: derive %s (backlog %d), route %s", worst.Derive.Round(time.Millisecond), worst.Backlog, worst.Route.Round(time.Millisecond))

	lag, err := sys.WaitCaughtUp(ctx, 3*time.Minute)
	if err != nil {
		sups.stop()
		return fmt.Errorf("wait for the workers: %w", err)
	}
	sups.waitSeen(ctx, 15*time.Second)
	sups.stop()
	if lag.Backlog > 0 || lag.Route > 0 {
		r.note("the workers had not caught up 3 min after the load (derive backlog %d, route lag %s): the check counts what is missing as lost", lag.Backlog, lag.Route)
	}
	unacked, err := f.pushDrain(ctx)
	if err != nil {
		return fmt.Errorf("drain the push side: %w", err)
	}
	chk, err := f.check(ctx)
	if err != nil {
		return fmt.Errorf("check the ledger: %w", err)
	}
	pf := f.pushFigures(ctx)
	chk.Invariants = append(chk.Invariants, unacked,
		Invariant{Name: "push side: pushes failing the receiver's checks (Standard Webhooks signature under the party's secret, its party)", Count: pf.bad, Example: pf.badEx})
	r.rep.Check = chk
	r.rep.Wake = sups.tracker.stats(f.measuredFrom(), r.o.Duration, f.supParties())
	r.note("fact → wake by kind: %s", sups.tracker.byKind(f.measuredFrom(), r.o.Duration))
	if len(smp.rewriting) > 0 {
		in, out := sups.tracker.split(f.measuredFrom(), r.o.Duration, smp.rewriting, 5*time.Second)
		r.note("Redis rewrote its AOF during %d sampled seconds of the load; fact → wake p99 of the facts sent while it did or up to 5 s after: %s (%d), of the others: %s (%d)",
			len(smp.rewriting), ms(in.P99), in.N, ms(out.P99), out.N)
	}
	f.rows(r, res, bl, chk)
	f.pushRows(r, pf)
	return nil
}

// sampled is what sampleLag read once a second during a load: the
// worst of each lag figure, and the seconds in which a single Redis was
// rewriting its AOF (a fork writing the whole dataset on the same cores).
type sampled struct {
	worst     Lag
	rewriting []time.Time
}

// sampleLag reads the workers' lag, and whether Redis is rewriting its
// AOF, once a second until the returned function is called.
func sampleLag(ctx context.Context, sys *System) func() sampled {
	ctx, cancel := context.WithCancel(ctx)
	var s sampled
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case now := <-t.C:
				if l, err := sys.Lag(ctx); err == nil {
					s.worst = Lag{Derive: max(s.worst.Derive, l.Derive), Backlog: max(s.worst.Backlog, l.Backlog), Route: max(s.worst.Route, l.Route)}
				}
				if persistence(ctx, sys.Redis)["aof_rewrite_in_progress"] == 1 {
					s.rewriting = append(s.rewriting, now)
				}
			}
		}
	}()
	return func() sampled { cancel(); <-done; return s }
}

// fleet is the simulated world: supervisors, the sessions they spawned,
// and PR slots — each the author's one open PR at a time, whose story
// (link, opened, checks, approval, merge) runs step by step and starts
// over with a new PR when merged.
type fleet struct {
	o       Options
	sys     *System
	c       *http.Client
	admin   string
	sups    []member
	members []member // the worker sessions
	slots   []*prSlot
	repos   []string
	hooks   map[int]ghFixture
	sent    *sentLog
	wakes   *wakeTracker
	people  *pushSide // the people with push endpoints
	start   sync.Once
	first   time.Time // intended time of the load's first request
}

// member is one simulated session.
type member struct {
	id, party, tok string
	sup            string // its supervisor's party (workers)
}

func newFleet(o Options, sys *System) *fleet {
	valid := o.Duration + o.Warmup + 30*time.Minute
	f := &fleet{o: o, sys: sys, c: newHTTPClient(max(o.Conns, 256)), sent: &sentLog{}, wakes: newWakeTracker(),
		admin: token("human:bench-admin", "admin supervise", valid), hooks: storyFixtures()}
	for k := range max(o.Supervisors, 1) {
		id := fmt.Sprintf("sup-%02d", k)
		f.sups = append(f.sups, member{id: id, party: event.SessionSubject(id), tok: token(event.SessionSubject(id), "inbox", valid)})
	}
	for k := range max(o.Sessions, 1) {
		id := fmt.Sprintf("w-%04d", k)
		f.members = append(f.members, member{id: id, party: event.SessionSubject(id), sup: f.sups[k%len(f.sups)].party,
			tok: token(event.SessionSubject(id), "events:push inbox", valid)})
	}
	// Ten PRs a repository, so GitHub traffic spreads over journal shards
	// as a fleet working on many repositories does.
	for k := range max(1, o.PRs/10) {
		f.repos = append(f.repos, fmt.Sprintf("bench-org/repo-%02d", k))
	}
	for range max(o.PRs, 1) {
		s := &prSlot{}
		s.cond = sync.NewCond(&s.mu)
		f.slots = append(f.slots, s)
	}
	f.people = newPushSide(f.members, valid)
	return f
}

func (f *fleet) gateway(i int64) string { return f.sys.Gateways[int(i)%len(f.sys.Gateways)] }

func (f *fleet) supParties() []string {
	out := make([]string, len(f.sups))
	for i, s := range f.sups {
		out[i] = s.party
	}
	return out
}

// measuredFrom is when the measured window of the load began.
func (f *fleet) measuredFrom() time.Time { return f.first.Add(f.o.Warmup) }

// setup raises the workspace rate cap out of the way and spawns every
// worker session under its supervisor (session.spawned data.parent: the
// router makes the parent the child's controller), then waits until the
// spawns are routed, so every later event finds its controller.
func (f *fleet) setup(ctx context.Context) error {
	err := api(ctx, f.c, http.MethodPut, f.sys.Gateways[0]+"/v1/workspace/supervision", f.admin,
		map[string]any{"rate": map[string]any{"per": "1s", "burst": 10000}}, http.StatusOK, nil)
	if err != nil {
		return fmt.Errorf("raise the rate cap: %w", err)
	}
	// The people subscribe before the spawns, so the routing rules the
	// check applies name them for every event of the run.
	if err := f.people.start(ctx, f.c, f.sys.Gateways[0]); err != nil {
		return fmt.Errorf("the push side: %w", err)
	}
	err = parallel(ctx, len(f.members), 32, func(ctx context.Context, k int) error {
		m := f.members[k]
		sup := strings.TrimPrefix(m.sup, "session:")
		return f.push(ctx, int64(k), m, "spawn-"+m.id, event.TypeSessionSpawned, "spawned under "+sup, map[string]any{"parent": sup})
	})
	if err != nil {
		return fmt.Errorf("spawn the sessions: %w", err)
	}
	if lag, err := f.sys.WaitCaughtUp(ctx, time.Minute); err != nil || lag.Backlog > 0 || lag.Route > 0 {
		return fmt.Errorf("spawns not routed within a minute (lag %+v): %v", lag, err) //nolint:errorlint // err may be nil (a lag without an error)
	}
	return nil
}

// parallel runs f(0) … f(n-1), at most limit at once, and returns the
// first error.
func parallel(ctx context.Context, n, limit int, f func(ctx context.Context, k int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	sem := make(chan struct{}, limit)
	for k := range n {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			if err := f(ctx, k); err != nil {
				mu.Lock()
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return first
}

// do sends load request i: two in five are steps of PR stories, the rest
// agent pushes (and messages) from the sessions in turn.
func (f *fleet) do(ctx context.Context, i int64) error {
	f.start.Do(func() { f.first = Intended(ctx) })
	q, rem := (i-1)/5, (i-1)%5
	if rem < 2 {
		return f.storyStep(ctx, i, 2*q+rem)
	}
	return f.agentStep(ctx, i, 3*q+rem-2)
}

// agentTurn is what a session does on its k-th request, k mod 20: a
// working session's turns, with attention points (idle turn ends,
// questions, a message to its supervisor) and the occasional crash and
// permission prompt.
var agentTurn = [20]string{
	event.TypeSessionTurnStarted, "idle", event.TypeSessionTurnStarted, event.TypeSessionAwaitingInput,
	event.TypeSessionTurnStarted, "busy", "message", "idle",
	event.TypeSessionTurnStarted, event.TypeSessionPermissionRequested, event.TypeSessionTurnStarted, "idle",
	event.TypeSessionTurnStarted, event.TypeSessionAwaitingInput, event.TypeSessionTurnStarted, "busy",
	event.TypeSessionTurnStarted, event.TypeSessionCrashed, event.TypeSessionResumed, "idle",
}

// attentionTurns are the agentTurn kinds of priority attention or more
// (docs/design.md §2 vocabulary): each must wake the session's supervisor.
var attentionTurns = map[string]bool{"idle": true, event.TypeSessionAwaitingInput: true, "message": true,
	event.TypeSessionPermissionRequested: true, event.TypeSessionCrashed: true}

// agentStep is agent request a: session a mod sessions, its turn a ÷ sessions.
func (f *fleet) agentStep(ctx context.Context, i, a int64) error {
	m := f.members[a%int64(len(f.members))]
	n := int64(len(f.members))
	kind := agentTurn[(a/n+a%n)%int64(len(agentTurn))] // sessions in different phases of their turns
	id := "e-" + strconv.FormatInt(i, 10)
	var err error
	switch kind {
	case "message":
		id, err = f.message(ctx, i, m)
	case "idle", "busy":
		err = f.push(ctx, i, m, id, event.TypeSessionTurnEnded, "turn ended", map[string]any{"idle": kind == "idle"})
	default:
		err = f.push(ctx, i, m, id, kind, strings.TrimPrefix(kind, "session."), nil)
	}
	if err == nil && attentionTurns[kind] {
		f.wakes.expect(id, m.sup, kind, Intended(ctx))
	}
	return err
}

// push sends one CloudEvent as session m and records it as sent.
func (f *fleet) push(ctx context.Context, i int64, m member, id, typ, summary string, data map[string]any) error {
	ev := map[string]any{"specversion": "1.0", "id": id, "source": "bench", "type": typ, "summary": m.id + ": " + summary}
	if data != nil {
		ev["data"] = data
	}
	body, err := json.Marshal(ev)
	if err != nil {
		return err
	}
	if _, err := send(f.c, pushRequest(ctx, f.gateway(i), m.tok, body), http.StatusAccepted); err != nil {
		return err
	}
	f.sent.add(sentFact{source: event.AgentSource(workspace, m.party), id: id})
	return nil
}

// message sends an info message from m to its supervisor (POST
// /v1/sessions/{sup}/messages) and returns the id the gateway gave it.
func (f *fleet) message(ctx context.Context, i int64, m member) (string, error) {
	var out struct {
		ID string `json:"id"`
	}
	err := api(ctx, f.c, http.MethodPost, f.gateway(i)+"/v1/sessions/"+strings.TrimPrefix(m.sup, "session:")+"/messages", m.tok,
		map[string]any{"text": m.id + ": done with step " + strconv.FormatInt(i, 10) + ", have a look", "intent": "info"},
		http.StatusAccepted, &out)
	if err != nil {
		return "", err
	}
	f.sent.add(sentFact{source: event.AgentSource(workspace, m.party), id: out.ID})
	return out.ID, nil
}

// The steps of a PR story, in order.
const (
	stepLink   = iota // the author's session.pr_opened
	stepOpened        // pull_request opened
	stepSuite         // check_suite completed (success): the PR becomes ready
	stepRun           // check_run completed (success)
	stepReview        // pull_request_review submitted (approved)
	stepMerged        // pull_request closed (merged)
	storySteps
)

// prSlot runs its stories' steps strictly in turn: a step waits until the
// one before it has been answered, as GitHub sends a PR's events.
type prSlot struct {
	mu   sync.Mutex
	cond *sync.Cond
	done int64 // steps answered so far
	cur  *story
}

// story is one PR from link to merge.
type story struct {
	repo     string
	number   int
	sha      string
	hour     string // "2006-01-02T15:" the fixtures' timestamps are moved to
	author   member
	accepted [storySteps]bool
}

func (s *story) subject() string  { return event.PRSubject(s.repo, s.number) }
func (s *story) source() string   { return "//github.com/" + s.repo }
func (s *story) readyID() string  { return fmt.Sprintf("pr/%d/ready/%s", s.number, s.sha) }
func (s *story) closedID() string { return fmt.Sprintf("pr/%d/closed/%s21:18Z", s.number, s.hour) } // the fixture's closed_at

// storyStep is story request s: slot s mod PRs, that slot's step s ÷ PRs.
func (f *fleet) storyStep(ctx context.Context, i, s int64) error {
	slot := f.slots[s%int64(len(f.slots))]
	turn := s / int64(len(f.slots))
	slot.mu.Lock()
	for slot.done < turn {
		slot.cond.Wait()
	}
	slot.mu.Unlock()
	defer func() {
		slot.mu.Lock()
		slot.done++
		slot.cond.Broadcast()
		slot.mu.Unlock()
	}()
	step := int(turn % storySteps)
	if step == stepLink {
		slot.cur = f.newStory(int(s%int64(len(f.slots))), int(turn/storySteps))
	}
	st := slot.cur
	err := f.sendStep(ctx, i, st, step)
	st.accepted[step] = err == nil
	return err
}

// newStory is generation gen of PR slot k: a new PR number and head.
func (f *fleet) newStory(k, gen int) *story {
	sum := sha1.Sum(fmt.Appendf(nil, "%s/%d/%d", f.sys.Prefix, k, gen))
	author := f.members[(k*len(f.members)/len(f.slots))%len(f.members)]
	st := &story{repo: f.repos[k%len(f.repos)], number: gen*len(f.slots) + k + 1, sha: hex.EncodeToString(sum[:]),
		hour: time.Now().UTC().Format("2006-01-02T15:"), author: author}
	f.sent.addStory(st)
	return st
}

func (f *fleet) sendStep(ctx context.Context, i int64, st *story, step int) error {
	if step == stepLink {
		return f.push(ctx, i, st.author, "pr-"+strconv.Itoa(st.number), event.TypeSessionPrOpened, "opened a PR",
			map[string]any{"repo": st.repo, "number": st.number})
	}
	fx := f.hooks[step]
	req, guid := webhook(ctx, f.gateway(i), fx.event, fx.body(st))
	if _, err := send(f.c, req); err != nil {
		return err
	}
	id := guid
	switch step {
	case stepSuite, stepRun: // journaled once per PR it resolves to
		id = guid + "/" + strconv.Itoa(st.number)
	case stepMerged: // a fixed fact id: webhook and reconciliation agree
		id = st.closedID()
	}
	f.sent.add(sentFact{source: st.source(), id: id, guid: guid})
	at := Intended(ctx)
	switch step {
	case stepOpened:
		f.wakes.expect(id, st.author.sup, "pr opened", at)
	case stepSuite: // the first passing result at head makes it ready
		if st.accepted[stepOpened] {
			f.wakes.expect(st.readyID(), st.author.sup, "pr ready", at)
		}
	case stepReview:
		f.wakes.expect(id, st.author.sup, "pr approved", at)
	case stepMerged:
		f.wakes.expect(id, st.author.sup, "pr merged", at)
	}
	return nil
}

// ghFixture is a real delivery body whose repository, PR number, head
// sha and date are rewritten per story.
type ghFixture struct {
	event string
	raw   string
}

const (
	fixtureSHA  = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"
	fixtureHour = "2019-05-15T15:"
)

func storyFixtures() map[int]ghFixture {
	return map[int]ghFixture{
		stepOpened: {"pull_request", string(fixture("pull_request.opened.json"))},
		stepSuite:  {"check_suite", string(fixture("check_suite.completed.json"))},
		stepRun:    {"check_run", string(fixture("check_run.completed.json"))},
		stepReview: {"pull_request_review", string(fixture("pull_request_review.submitted.approved.json"))},
		stepMerged: {"pull_request", string(fixture("pull_request.closed.merged.json"))},
	}
}

// body is the fixture about st: its repository, number and head sha,
// and the fixture's timestamps moved to the story's hour. Each is a new
// body, as the gateway refuses a byte-identical one under a fresh GUID.
func (fx ghFixture) body(st *story) []byte {
	n := strconv.Itoa(st.number)
	return []byte(strings.NewReplacer(fixtureRepo, st.repo, fixtureSHA, st.sha, fixtureHour, st.hour,
		`"number": 2,`, `"number": `+n+`,`, "\"number\": 2\n", "\"number\": "+n+"\n").Replace(fx.raw))
}

// sentLog is what the gateway acknowledged (2xx): facts by the (source,
// id) they must be journaled under, and the PR stories.
type sentLog struct {
	mu      sync.Mutex
	facts   []sentFact
	stories []*story
}

// sentFact is one acknowledged fact. A webhook's guid is its delivery
// GUID: no other journaled id may start with it.
type sentFact struct {
	source, id string
	guid       string
}

func (l *sentLog) add(f sentFact) {
	l.mu.Lock()
	l.facts = append(l.facts, f)
	l.mu.Unlock()
}

func (l *sentLog) addStory(s *story) {
	l.mu.Lock()
	l.stories = append(l.stories, s)
	l.mu.Unlock()
}

// rows adds fleet's figures with their verdicts.
func (f *fleet) rows(r *runner, res, bl Result, chk *Check) {
	rep, o := r.rep, f.o
	world := fmt.Sprintf("%d sessions, %d supervisors, %d PRs", len(f.members), len(f.sups), len(f.slots))
	want := float64(fleetTarget) // the target for fleet; a soak is held to the rate it offers
	if o.Scenario != "fleet" {
		want = o.Rate
	}
	rep.row(fmt.Sprintf("%s mixed, open loop at %.0f/s for %s: ≥ %.0f events/s sustained, no errors (ratio: to the bare handler's closed-loop throughput)", o.Scenario, o.Rate, o.Duration, want),
		res.Achieved, "events/s", bl.Achieved, res.Achieved/bl.Achieved, verdict(res.Achieved >= want*0.999 && errorCount(res) == 0))
	if wk := rep.Wake; wk != nil {
		rep.row(fmt.Sprintf("%s (%s): fact → wake p99 < 100 ms, every expected wake seen (%d of %d)", o.Scenario, world, wk.Seen, wk.Expected),
			msf(wk.Latency.P99), "ms", 0, 0, verdict(wk.Latency.P99 < 100*time.Millisecond && wk.Seen == wk.Expected && wk.Expected > 0))
	}
	rep.row(fmt.Sprintf("%s: accepted facts lost (not journaled) or deliveries lost (not in the ledger) = 0", o.Scenario), float64(chk.Lost), "", 0, 0, verdict(chk.Lost == 0))
	rep.row(fmt.Sprintf("%s: duplicated (journaled twice, or more than one inbox seq per recipient) = 0", o.Scenario), float64(chk.Duplicated), "", 0, 0, verdict(chk.Duplicated == 0))
	rep.row(fmt.Sprintf("%s: misrouted (delivered to a party the routing rules do not name) = 0", o.Scenario), float64(chk.Misrouted), "", 0, 0, verdict(chk.Misrouted == 0))
	for _, inv := range chk.Invariants {
		rep.row(fmt.Sprintf("%s: %s = 0", o.Scenario, inv.Name), float64(inv.Count), "", 0, 0, verdict(inv.Count == 0))
	}
}
