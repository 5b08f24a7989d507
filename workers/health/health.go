package health

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/delivery/outbound"

	"github.com/wakegate/wakegate/delivery/escalate"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
)

// Config tunes the sweep. Zero values take the defaults.
type Config struct {
	// Prefix starts every key (WAKEGATE_REDIS_PREFIX). Default keyspace.DefaultPrefix.
	Prefix string
	// SessionTTL is WAKEGATE_SESSION_TTL, the registry's: a session seen
	// then silent this long is dead. Default 10m.
	SessionTTL time.Duration
	// MaxTurn is WAKEGATE_MAX_TURN: a session busy this long with no
	// heartbeat is stalled. Default 1h.
	MaxTurn time.Duration
	// StuckAfter is WAKEGATE_PR_STUCK_AFTER: an open PR, not a draft,
	// with the same head and no new check result this long is stuck.
	// Default 6h.
	StuckAfter time.Duration
	// Resync bounds how long a session not known dead goes without being
	// evaluated again, for what changes without a journal event (a lease
	// released). Default 1h.
	Resync time.Duration
	// Spread spreads a periodic pass (Sweep) over up to this long: after
	// each step — a feed round, an evaluation — it waits twice as long as
	// the step took, so it runs at a third of its flat-out rate and leaves
	// the routers the CPU they need (run flat out once a minute, it held
	// wakes back for seconds under load). Past Spread it
	// runs flat out. 0, the default, never waits; the worker sets half the
	// period. Reports never wait.
	Spread time.Duration
}

func (c Config) withDefaults() Config {
	if c.Prefix == "" {
		c.Prefix = keyspace.DefaultPrefix
	}
	if c.SessionTTL <= 0 {
		c.SessionTTL = 10 * time.Minute
	}
	if c.MaxTurn <= 0 {
		c.MaxTurn = time.Hour
	}
	if c.StuckAfter <= 0 {
		c.StuckAfter = 6 * time.Hour
	}
	if c.Resync <= 0 {
		c.Resync = time.Hour
	}
	return c
}

// Fixed windows of the checks.
const (
	// window is I4's and I5's: drivers and wakes of the last hour.
	window = time.Hour
	// faultWindow is how long an undeliverable fault counts against I2.
	faultWindow = 24 * time.Hour
	// repairWindow is how long a repair counts in a report's "repaired".
	repairWindow = 24 * time.Hour
	// overdueGrace is how late an armed escalation check may be before its
	// entry counts as overdue (I2): timers are accurate to ±2 s.
	overdueGrace = 10 * time.Second
	// watchGrace is how long after its subject ended a subscription "until
	// subject_terminal" is left to the router, which closes it when it
	// routes the terminal event (I6: within one reconciliation period).
	watchGrace = time.Minute
	// maxPerPass bounds the subjects and parties one pass evaluates per
	// workspace; the rest wait for the next pass (the report says so).
	maxPerPass = 5000
	// maxExamples bounds the examples of one invariant in a report.
	maxExamples = 5
)

// Deps are the stores the sweep reads and repairs through.
type Deps struct {
	Redis     redis.UniversalClient
	Journal   *journal.Journal
	Sessions  *sessions.Registry
	Subs      *subscriptions.Store
	Sup       *supervision.Store
	Inbox     *inbox.Inbox
	Endpoints endpoints
	Tracker   prTracker
	// Escalator schedules a recipient's escalation timer (package
	// workers/tasks); nil: unreached entries are reported, not repaired.
	Escalator escalator
	Log       *slog.Logger
	// Registerer takes the sweep's metrics; nil: a private registry.
	Registerer prometheus.Registerer
}

// endpoints reads push endpoints (delivery/outbound).
type endpoints interface {
	Get(ctx context.Context, workspace, party string) (*outbound.Endpoint, error)
}

// prTracker reads the PR tracker's state (delivery/tracker).
type prTracker interface {
	State(ctx context.Context, repo string, number int) (tracker.PRState, error)
}

// escalator makes sure a recipient's escalation timer runs by the earliest
// due of its armed entries; idempotent (workers/tasks.Escalator).
type escalator interface {
	Schedule(ctx context.Context, workspace, party string) error
}

// Sweeper is the health sweep. It is safe for concurrent use, and any
// number of processes may sweep one Redis at once: every step is
// idempotent.
type Sweeper struct {
	rdb  redis.UniversalClient
	j    *journal.Journal
	reg  *sessions.Registry
	subs *subscriptions.Store
	sup  *supervision.Store
	box  *inbox.Inbox
	eps  endpoints
	prs  prTracker
	esc  escalator
	escs *escalate.Store
	log  *slog.Logger
	m    *metrics
	cfg  Config
}

// New returns the sweep over deps.
func New(deps Deps, cfg Config) *Sweeper {
	cfg = cfg.withDefaults()
	if deps.Log == nil {
		deps.Log = slog.Default()
	}
	if deps.Registerer == nil {
		deps.Registerer = prometheus.NewRegistry()
	}
	return &Sweeper{rdb: deps.Redis, j: deps.Journal, reg: deps.Sessions, subs: deps.Subs, sup: deps.Sup,
		box: deps.Inbox, eps: deps.Endpoints, prs: deps.Tracker, esc: deps.Escalator,
		escs: escalate.New(deps.Redis, cfg.Prefix), log: deps.Log.With("component", "health"),
		m: newMetrics(deps.Registerer), cfg: cfg}
}

// Stats is what one pass did.
type Stats struct {
	Fed       int  // journal and ledger entries filed
	Behind    bool // the feed or an evaluation queue was not drained: the next pass goes on
	Evaluated int  // subjects and parties evaluated (the work: unchanged ones are not)
	Sessions  int  // of which sessions
	PRs       int  // of which pull requests
	Parties   int  // of which recipients
	// Synthesized counts session.stalled and github.pull_request.stuck
	// events this pass journaled (not re-runs).
	Synthesized int
	// Repaired counts repairs this pass made: watches closed, escalation
	// timers rescheduled for overdue unreached entries.
	Repaired int
}

func (a *Stats) add(b Stats) {
	a.Behind = a.Behind || b.Behind
	a.Evaluated += b.Evaluated
	a.Sessions += b.Sessions
	a.PRs += b.PRs
	a.Parties += b.Parties
	a.Synthesized += b.Synthesized
	a.Repaired += b.Repaired
}

// Pass is the periodic sweep as a workers/schedule job: Sweep, logged.
func (s *Sweeper) Pass(ctx context.Context, now time.Time) error {
	st, err := s.Sweep(ctx, now)
	if st.Synthesized > 0 || st.Repaired > 0 || st.Behind {
		s.log.Info("health sweep", "evaluated", st.Evaluated, "fed", st.Fed, "synthesized", st.Synthesized,
			"repaired", st.Repaired, "behind", st.Behind)
	} else {
		s.log.Debug("health sweep", "evaluated", st.Evaluated, "fed", st.Fed)
	}
	return err
}

// Sweep is one periodic pass over every workspace: it files what the
// journal and the delivery ledgers gained since the last pass, evaluates
// the subjects and parties whose state changed or whose time-based
// condition is due (and no other), records the findings, repairs what it
// can (closes watches left on ended subjects, schedules the escalation of
// overdue unreached entries), synthesizes session.stalled and
// github.pull_request.stuck, and sets the gauges.
func (s *Sweeper) Sweep(ctx context.Context, now time.Time) (Stats, error) {
	start := time.Now()
	var st Stats
	pace := &pacer{until: start.Add(s.cfg.Spread)}
	fed, behind, err := s.feed(ctx, feedRounds, pace)
	st.Fed, st.Behind = fed, behind
	if err != nil {
		return st, err
	}
	wss, err := s.rdb.SMembers(ctx, s.wsKey()).Result()
	if err != nil {
		return st, fmt.Errorf("health workspaces: %w", err)
	}
	slices.Sort(wss)
	var errs []error
	for _, ws := range wss {
		wst, _, err := s.pass(ctx, ws, now, pace)
		st.add(wst)
		if err != nil {
			errs = append(errs, fmt.Errorf("workspace %s: %w", ws, err))
		}
	}
	if err := s.gauges(ctx, wss, now); err != nil {
		errs = append(errs, err)
	}
	s.m.passSeconds.Observe(time.Since(start).Seconds())
	return st, errors.Join(errs...)
}

// Report runs the sweep's checks for one workspace now — after filing
// what the journal gained — and answers the report; it repairs and
// synthesizes nothing (the periodic sweep does) and leaves the sweep's
// queues as they are.
func (s *Sweeper) Report(ctx context.Context, workspace string, now time.Time) (*Report, error) {
	if !event.ValidWorkspace(workspace) {
		return nil, fmt.Errorf("health: workspace %q", workspace)
	}
	_, behind, err := s.feed(ctx, reportFeedRounds, nil)
	if err != nil {
		return nil, err
	}
	st, overlay, err := s.check(ctx, workspace, now)
	if err != nil {
		return nil, err
	}
	r, err := s.report(ctx, workspace, now, overlay)
	if err != nil {
		return nil, err
	}
	r.Behind = behind || st.Behind
	return r, nil
}

// ReportJSON is Report for the gateway, which knows nothing of this
// package's types.
func (s *Sweeper) ReportJSON(ctx context.Context, workspace string, now time.Time) (any, error) {
	return s.Report(ctx, workspace, now)
}

// run is one pass over one workspace.
type run struct {
	s        *Sweeper
	ws       string
	now      time.Time
	repair   bool // the periodic pass: repairs, synthesizes, consumes its queues
	settings supervision.Settings
	pipe     redis.Pipeliner // findings and queue writes, executed at the end
	st       Stats
	ended    map[string]bool // subject → ended, read once per pass
	// overlay holds a report's findings (inv → item → finding, nil when
	// cleared) instead of writing them: a report writes nothing a
	// concurrent periodic pass could find stale.
	overlay map[string]map[string]*finding
}

// check is a report's pass: the periodic pass's evaluations of one
// workspace without repairs, synthesis or writes; it returns the findings
// it made, to read over the stored ones.
func (s *Sweeper) check(ctx context.Context, ws string, now time.Time) (Stats, map[string]map[string]*finding, error) {
	return s.pass(ctx, ws, now, nil)
}

// pass evaluates one workspace: the subjects whose journal position moved
// (T:dirty), the subjects and parties due (T:due), the sessions with no
// supervisor (a lease taken is not journaled), and the active parties whose
// counters moved. The periodic pass (pace not nil) consumes T:dirty,
// writes T:due and T:pver and repairs, pacing its evaluations; a report's
// (nil) writes findings only.
func (s *Sweeper) pass(ctx context.Context, ws string, now time.Time, pace *pacer) (Stats, map[string]map[string]*finding, error) {
	repair := pace != nil
	settings, err := s.sup.Settings(ctx, ws)
	if err != nil {
		return Stats{}, nil, err
	}
	r := &run{s: s, ws: ws, now: now, repair: repair, settings: settings, pipe: s.rdb.Pipeline(), ended: map[string]bool{}}
	if !repair {
		r.overlay = map[string]map[string]*finding{}
	}
	resync, err := r.settingsChanged(ctx)
	if err != nil {
		return r.st, nil, err
	}
	subjects, dirty, err := r.subjects(ctx, resync)
	if err != nil {
		return r.st, nil, err
	}
	var errs []error
	due := map[string]time.Time{} // member → next due; zero: none
	failed := map[string]bool{}
	for _, subj := range subjects {
		step := time.Now()
		next, err := r.subject(ctx, subj)
		pace.wait(ctx, step)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", subj, err))
			failed[subjectMember+subj] = true
			continue
		}
		due[subjectMember+subj] = next
	}
	parties, counts, err := r.parties(ctx, resync)
	if err != nil {
		errs = append(errs, err)
	}
	versions := map[string]string{}
	var idle []string
	for i, p := range parties {
		step := time.Now()
		next, keep, ver, err := r.party(ctx, p, counts[i])
		pace.wait(ctx, step)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", p, err))
			failed[partyMember+p] = true
			continue
		}
		due[partyMember+p] = next
		versions[p] = ver
		if !keep {
			idle = append(idle, p)
		}
	}
	if repair {
		r.commitQueues(ctx, dirty, due, failed, versions, idle)
		r.pipe.HSet(ctx, s.stampKey(ws), "pass", now.UnixMilli())
	}
	if _, err := r.pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		errs = append(errs, fmt.Errorf("record findings: %w", err))
	}
	if repair && len(dirty) > 0 {
		if err := r.s.consumeDirty(ctx, ws, dirty, failed); err != nil {
			errs = append(errs, err)
		}
	}
	return r.st, r.overlay, errors.Join(errs...)
}

// settingsChanged compares the workspace settings with the ones the last
// periodic pass applied: a change (a default controller set, a rate
// changed) re-evaluates every session and party of the workspace. The
// periodic pass queues them (every session dirty, every party's version
// forgotten), so the passes drain them within their bounds; a report
// evaluates them (as many as its bound allows) and answers true.
func (r *run) settingsChanged(ctx context.Context) (bool, error) {
	b, _ := json.Marshal(r.settings)
	sum := sha1.Sum(b)
	stamp := hex.EncodeToString(sum[:8])
	cur, err := r.s.rdb.HGet(ctx, r.s.stampKey(r.ws), "settings").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("health stamp: %w", err)
	}
	if cur == stamp {
		return false, nil
	}
	if !r.repair {
		return true, nil
	}
	all, err := r.s.rdb.ZRange(ctx, r.s.sessionsKey(r.ws), 0, -1).Result()
	if err != nil {
		return false, fmt.Errorf("health resync: %w", err)
	}
	pipe := r.s.rdb.Pipeline()
	version := float64(r.now.UnixMilli()) * 1000
	for _, subj := range all {
		pipe.ZAddGT(ctx, r.s.dirtyKey(r.ws), redis.Z{Score: version, Member: subjectMember + subj})
	}
	pipe.Del(ctx, r.s.pverKey(r.ws))
	pipe.HSet(ctx, r.s.stampKey(r.ws), "settings", stamp)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("health resync: %w", err)
	}
	return false, nil
}

// subjects lists the subjects to evaluate: dirty ones (with the version
// read, to consume them after), due ones, the sessions with an I1 finding,
// and with resync every session of the workspace.
func (r *run) subjects(ctx context.Context, resync bool) ([]string, map[string]float64, error) {
	s, ws := r.s, r.ws
	pipe := s.rdb.Pipeline()
	dirtyCmd := pipe.ZRangeWithScores(ctx, s.dirtyKey(ws), 0, maxPerPass-1)
	dueCmd := pipe.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.dueKey(ws), ByScore: true, Start: "-inf",
		Stop: fmt.Sprint(r.now.UnixMilli()), Count: maxPerPass})
	i1Cmd := pipe.HKeys(ctx, s.findingsKey(ws, "I1"))
	var allCmd *redis.StringSliceCmd
	if resync {
		allCmd = pipe.ZRange(ctx, s.sessionsKey(ws), 0, -1)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("health queues: %w", err)
	}
	seen := map[string]bool{}
	var out []string
	addSubj := func(subj string) {
		if !seen[subj] {
			seen[subj] = true
			out = append(out, subj)
		}
	}
	dirty := map[string]float64{}
	for _, z := range dirtyCmd.Val() {
		m, _ := z.Member.(string)
		dirty[m] = z.Score
		if subj, ok := strings.CutPrefix(m, subjectMember); ok {
			addSubj(subj)
		}
	}
	if len(dirtyCmd.Val()) == maxPerPass {
		r.st.Behind = true
	}
	for _, m := range dueCmd.Val() {
		if subj, ok := strings.CutPrefix(m, subjectMember); ok {
			addSubj(subj)
		}
	}
	for _, subj := range i1Cmd.Val() {
		addSubj(subj)
	}
	if allCmd != nil {
		for _, subj := range allCmd.Val() {
			if len(out) == maxPerPass {
				r.st.Behind = true
				break
			}
			addSubj(subj)
		}
	}
	return out, dirty, nil
}

// subject evaluates one subject: a session or a pull request.
func (r *run) subject(ctx context.Context, subj string) (time.Time, error) {
	switch {
	case strings.HasPrefix(subj, "session:"):
		r.st.Evaluated++
		r.st.Sessions++
		r.s.m.evaluations.WithLabelValues("session").Inc()
		return r.session(ctx, subj)
	case isPR(subj):
		r.st.Evaluated++
		r.st.PRs++
		r.s.m.evaluations.WithLabelValues("pull_request").Inc()
		return r.pullRequest(ctx, subj)
	}
	return time.Time{}, nil
}

// commitQueues queues the periodic pass's bookkeeping: the next due of
// everything evaluated (a failure is retried next pass), the counters each
// party was evaluated at, and the parties with nothing left to watch.
func (r *run) commitQueues(ctx context.Context, dirty map[string]float64, due map[string]time.Time,
	failed map[string]bool, versions map[string]string, idle []string) {
	s, ws := r.s, r.ws
	for m, next := range due {
		if next.IsZero() {
			r.pipe.ZRem(ctx, s.dueKey(ws), m)
		} else {
			r.pipe.ZAdd(ctx, s.dueKey(ws), redis.Z{Score: float64(next.UnixMilli()), Member: m})
		}
	}
	for m := range failed {
		r.pipe.ZAdd(ctx, s.dueKey(ws), redis.Z{Score: float64(r.now.UnixMilli()), Member: m})
	}
	for p, v := range versions {
		r.pipe.HSet(ctx, s.pverKey(ws), p, v)
	}
	for _, p := range idle {
		r.pipe.SRem(ctx, s.activeKey(ws), p)
		r.pipe.HDel(ctx, s.pverKey(ws), p)
	}
}

// consumeScript removes dirty members whose version is still the one the
// pass read: a subject journaled again meanwhile stays dirty.
// Its KEYS, ARGV and reply are in consume.lua.
//
//go:embed consume.lua
var consumeLua string

var consumeScript = keyspace.NewScript("workers/health/consume.lua", consumeLua)

func (s *Sweeper) consumeDirty(ctx context.Context, ws string, dirty map[string]float64, failed map[string]bool) error {
	args := make([]any, 0, 2*len(dirty))
	for m, v := range dirty {
		if !failed[m] {
			args = append(args, m, formatScore(v))
		}
	}
	for len(args) > 0 {
		n := min(len(args), 1000)
		if err := consumeScript.Run(ctx, s.rdb, []string{s.dirtyKey(ws)}, args[:n]...).Err(); err != nil {
			return fmt.Errorf("consume dirty subjects: %w", err)
		}
		args = args[n:]
	}
	return nil
}

// soonest keeps the earliest of due times after now.
type soonest struct {
	now time.Time
	at  time.Time
}

func (s *soonest) add(t time.Time) {
	if t.IsZero() || !t.After(s.now) {
		return
	}
	if s.at.IsZero() || t.Before(s.at) {
		s.at = t
	}
}

// setFinding records (or, with n == 0, clears) the finding of inv about
// item.
func (r *run) setFinding(ctx context.Context, inv, item string, n int64, example any) {
	var f *finding
	if n > 0 {
		ex, _ := json.Marshal(example)
		f = &finding{N: n, Example: ex}
	}
	if r.overlay != nil {
		if r.overlay[inv] == nil {
			r.overlay[inv] = map[string]*finding{}
		}
		r.overlay[inv][item] = f
		return
	}
	key := r.s.findingsKey(r.ws, inv)
	if f == nil {
		r.pipe.HDel(ctx, key, item)
		return
	}
	b, _ := json.Marshal(f)
	r.pipe.HSet(ctx, key, item, b)
}

// repaired records one repair of inv (idempotent per what) and counts it
// when it is new.
func (r *run) repaired(ctx context.Context, inv, what string) {
	added, err := r.s.rdb.ZAddNX(ctx, r.s.repairsKey(r.ws, inv), redis.Z{Score: float64(r.now.UnixMilli()), Member: what}).Result()
	if err != nil || added == 0 {
		return
	}
	r.st.Repaired++
	r.s.m.repairs.WithLabelValues(inv).Inc()
}

// pacer spreads a periodic pass's steps (Config.Spread).
type pacer struct {
	until time.Time // wait after a step until then; after, run flat out
}

// wait waits twice as long as the step begun at step took; a nil pacer
// (a report's) does not wait.
func (p *pacer) wait(ctx context.Context, step time.Time) {
	now := time.Now()
	if p == nil || now.After(p.until) {
		return
	}
	t := time.NewTimer(2 * now.Sub(step))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

func formatScore(v float64) string { return fmt.Sprintf("%.0f", v) }
