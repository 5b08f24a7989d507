// Package dashboard reads what the supervision dashboard shows (docs/design.md
// §11): the fleet tree with liveness and leases, a person's inbox, the open
// pull requests and the health report. It only reads: it imports no worker,
// router or push code, so rendering liveness and wake state never acquires
// the power to run work. Its one write path is the caller's own (acks and
// quiet go through the gateway's stores, not through here).
package dashboard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
)

// Bounds of one page (docs/design.md §10: every list is paged).
const (
	DefaultSessions = 1000
	MaxSessions     = 1000
	DefaultPRs      = 200
	MaxPRs          = 500
	MaxInbox        = inbox.MaxLimit
	MaxWorkspaces   = 200

	edgesBatch = 256 // sessions per supervision read
)

// Index lists what a workspace has (package workers/health keeps it; the
// reader only reads it).
type Index interface {
	Workspaces(ctx context.Context, limit int) ([]string, error)
	// Sessions are bare ids scored with the ms of their last event.
	Sessions(ctx context.Context, ws string, offset, limit int) ([]redis.Z, int64, error)
	PullRequests(ctx context.Context, ws string, offset, limit int) ([]string, int64, error)
}

// PRs reads a pull request's tracked state.
type PRs interface {
	State(ctx context.Context, repo string, number int) (tracker.PRState, error)
}

// Quiet reads a workspace's live quiet records.
type Quiet interface {
	QuietRecords(ctx context.Context, ws string, now time.Time) ([]holds.Quiet, error)
}

// Health answers the supervision health report of a workspace as a JSON
// document.
type Health interface {
	ReportJSON(ctx context.Context, workspace string, now time.Time) (any, error)
}

// Deps are the stores the reader reads.
type Deps struct {
	Redis    redis.UniversalClient
	Sessions *sessions.Registry
	Sup      *supervision.Store
	Inbox    *inbox.Inbox
	Index    Index  // nil: no fleet, no PRs
	PRs      PRs    // nil: no PRs
	Quiet    Quiet  // nil: no quiet shown
	Health   Health // nil: no health report
}

// Config tunes what counts as stalled and stuck.
type Config struct {
	MaxTurn    time.Duration // busy this long since its last turn start or heartbeat is stalled; default 1h
	StuckAfter time.Duration // an open PR with no new result for this long is stuck; default 6h
}

// Reader reads the dashboard's views.
type Reader struct {
	d   Deps
	cfg Config
}

// New returns a reader.
func New(d Deps, cfg Config) *Reader {
	if cfg.MaxTurn <= 0 {
		cfg.MaxTurn = time.Hour
	}
	if cfg.StuckAfter <= 0 {
		cfg.StuckAfter = 6 * time.Hour
	}
	return &Reader{d: d, cfg: cfg}
}

// Workspaces lists the workspaces known to the index (for the operator).
func (r *Reader) Workspaces(ctx context.Context) ([]string, error) {
	if r.d.Index == nil {
		return nil, nil
	}
	return r.d.Index.Workspaces(ctx, MaxWorkspaces)
}

// Status is one of the at-a-glance states of a session.
type Status string

// The at-a-glance states, in the order the header shows them.
const (
	Approval Status = "approval" // waiting for a permission decision
	Input    Status = "input"    // awaiting input
	Working  Status = "working"
	Idle     Status = "idle"
	Stalled  Status = "stalled"
	Dead     Status = "dead"
	Unknown  Status = "unknown" // nothing says which
)

// Statuses are the states the header counts.
var Statuses = []Status{Approval, Input, Working, Idle, Stalled, Dead}

// Label is how a person reads a status.
func (s Status) Label() string {
	switch s {
	case Approval:
		return "waiting for approval"
	case Input:
		return "awaiting input"
	}
	return string(s)
}

// Node is one session of the fleet tree.
type Node struct {
	ID          string
	Parent      string // "" for a root; a parent outside this page is named but not nested
	Labels      []string
	Liveness    sessions.Liveness
	Busy        string // busy | idle | unknown
	Status      Status
	State       string    // last lifecycle type
	LastEventAt time.Time // of its last event in the index, or its last busy change
	SeenAt      time.Time
	PausedUntil time.Time
	PauseReason string
	Quiet       *holds.Quiet
	Controller  supervision.Resolution
	Edges       []supervision.Edge // its own leases and observers
	Blockers    int                // the viewer's unacked critical entries about it
	Children    []*Node
}

// Open is what the session waits on, "" when nothing.
func (n *Node) Open() string {
	switch n.Status {
	case Approval:
		return "permission requested"
	case Input:
		return "awaiting input"
	}
	return ""
}

// Paused reports whether the session is paused at now.
func (n *Node) Paused(now time.Time) bool { return n.PausedUntil.After(now) }

// Fleet is one page of a workspace's supervision tree.
type Fleet struct {
	Workspace string
	Roots     []*Node
	Count     int   // sessions on this page
	Total     int64 // sessions the index holds
	Offset    int
	Next      int // offset of the next page; 0 when none
	Counts    map[Status]int
	Default   string // the workspace default controller
}

// Fleet reads a page of a workspace's sessions: records, leases and
// observers in one pipelined round trip, effective controllers resolved
// from them (docs/design.md §5). blockers counts the viewer's unacked
// critical entries per session subject (may be nil).
func (r *Reader) Fleet(ctx context.Context, ws string, offset, limit int, blockers map[string]int, now time.Time) (*Fleet, error) {
	f := &Fleet{Workspace: ws, Offset: offset, Counts: map[Status]int{}}
	if r.d.Index == nil {
		return f, nil
	}
	zs, total, err := r.d.Index.Sessions(ctx, ws, offset, limit)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(zs))
	lastAt := make(map[string]time.Time, len(zs))
	for i, z := range zs {
		ids[i] = fmt.Sprint(z.Member)
		lastAt[ids[i]] = time.UnixMilli(int64(z.Score)).UTC()
	}
	f.Total = total
	if int64(offset+len(ids)) < total {
		f.Next = offset + len(ids)
	}
	settings, err := r.d.Sup.Settings(ctx, ws)
	if err != nil {
		return nil, fmt.Errorf("dashboard settings: %w", err)
	}
	f.Default = settings.DefaultController
	pipe := r.d.Redis.Pipeline()
	reads := make([]func(time.Time) (*sessions.Session, error), len(ids))
	for i, id := range ids {
		reads[i] = r.d.Sessions.Queue(ctx, pipe, ws, event.SessionSubject(id))
	}
	var edgesOf []func() (map[string][]supervision.Edge, error)
	for lo := 0; lo < len(ids); lo += edgesBatch {
		edgesOf = append(edgesOf, r.d.Sup.QueueEdgesFor(ctx, pipe, ws, ids[lo:min(len(ids), lo+edgesBatch)]))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("dashboard fleet: %w", err)
	}
	edges := map[string][]supervision.Edge{}
	for _, f := range edgesOf {
		m, err := f()
		if err != nil {
			return nil, fmt.Errorf("dashboard edges: %w", err)
		}
		for k, v := range m {
			edges[k] = v
		}
	}
	var quiet []holds.Quiet
	if r.d.Quiet != nil {
		if quiet, err = r.d.Quiet.QuietRecords(ctx, ws, now); err != nil {
			return nil, fmt.Errorf("dashboard quiet: %w", err)
		}
	}
	nodes := make(map[string]*Node, len(ids))
	recs := make(map[string]*sessions.Session, len(ids))
	order := make([]*Node, 0, len(ids))
	for i, id := range ids {
		rec, err := reads[i](now)
		if err != nil {
			return nil, fmt.Errorf("dashboard session: %w", err)
		}
		recs[event.SessionSubject(id)] = rec
		n := &Node{ID: id, Parent: rec.Parent, Labels: rec.Labels, Liveness: rec.Liveness, Busy: rec.Busy,
			State: rec.State, SeenAt: rec.SeenAt, LastEventAt: rec.BusyAt, PausedUntil: rec.PausedUntil,
			PauseReason: rec.PauseReason, Edges: edges[id], Blockers: blockers[event.SessionSubject(id)]}
		if at := lastAt[id]; at.After(n.LastEventAt) {
			n.LastEventAt = at
		}
		n.Status = r.status(rec, now)
		n.Quiet = quietFor(quiet, event.SessionSubject(id))
		f.Counts[n.Status]++
		nodes[id] = n
		order = append(order, n)
	}
	// Ancestors outside the page: their edges are needed to resolve.
	var missing []string
	wanted := map[string]bool{}
	for _, n := range order {
		for _, a := range recs[event.SessionSubject(n.ID)].Lineage {
			if _, ok := edges[a]; !ok && !wanted[a] {
				wanted[a] = true
				missing = append(missing, a)
			}
		}
	}
	for lo := 0; lo < len(missing); lo += edgesBatch {
		more, err := r.d.Sup.EdgesFor(ctx, ws, missing[lo:min(len(missing), lo+edgesBatch)])
		if err != nil {
			return nil, fmt.Errorf("dashboard edges: %w", err)
		}
		for k, v := range more {
			edges[k] = v
		}
	}
	var mu sync.Mutex
	deadCache := map[string]bool{}
	dead := func(ctx context.Context, ws, party string) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		if rec, ok := recs[party]; ok {
			return rec.Liveness == sessions.Dead, nil
		}
		if d, ok := deadCache[party]; ok {
			return d, nil
		}
		rec, err := r.d.Sessions.Get(ctx, ws, party, now)
		if err != nil {
			return false, err
		}
		deadCache[party] = rec.Liveness == sessions.Dead
		return deadCache[party], nil
	}
	for _, n := range order {
		chain := append([]string{n.ID}, recs[event.SessionSubject(n.ID)].Lineage...)
		res, err := supervision.EffectiveController(ctx, ws, chain, edges, f.Default, dead)
		if err != nil {
			return nil, fmt.Errorf("dashboard controller: %w", err)
		}
		n.Controller = res
	}
	for _, n := range order {
		if p, ok := nodes[n.Parent]; ok && n.Parent != n.ID {
			p.Children = append(p.Children, n)
		} else {
			f.Roots = append(f.Roots, n)
		}
	}
	byID := func(a, b *Node) int { return strings.Compare(a.ID, b.ID) }
	slices.SortFunc(f.Roots, byID)
	for _, n := range order {
		slices.SortFunc(n.Children, byID)
	}
	f.Count = len(order)
	return f, nil
}

// status is a session's at-a-glance state: dead first, then what it
// waits on, then stalled (busy past MaxTurn without a heartbeat), then
// busy or idle. Unknown busy state is never promoted to working.
func (r *Reader) status(rec *sessions.Session, now time.Time) Status {
	switch {
	case rec.Liveness == sessions.Dead:
		return Dead
	case rec.State == event.TypeSessionPermissionRequested:
		return Approval
	case rec.State == event.TypeSessionAwaitingInput:
		return Input
	case rec.State == event.TypeSessionStalled:
		return Stalled
	case rec.Busy == "busy" && !rec.BusyAt.IsZero() && now.Sub(rec.BusyAt) > r.cfg.MaxTurn:
		return Stalled
	case rec.Busy == "busy":
		return Working
	case rec.Busy == "idle":
		return Idle
	}
	return Unknown
}

func quietFor(qs []holds.Quiet, party string) *holds.Quiet {
	for i := range qs {
		if qs[i].Scope == party || qs[i].Scope == holds.ScopeAll {
			return &qs[i]
		}
	}
	return nil
}

// Inbox is a person's unacked entries grouped by kind.
type Inbox struct {
	Party   string
	Groups  []KindGroup
	Count   int  // entries shown
	More    bool // more unacked than shown
	Needing int  // attention+ entries among them
	Quiet   *holds.Quiet
}

// KindGroup is the entries of one kind, oldest first.
type KindGroup struct {
	Kind    string
	Entries []inbox.Entry
}

// kindOrder is the order kinds are shown in.
var kindOrder = []string{"alert", "wake", "notice", "digest"}

// Inbox reads up to limit of party's unacked entries, grouped by kind.
func (r *Reader) Inbox(ctx context.Context, ws, party string, limit int, now time.Time) (*Inbox, error) {
	entries, _, err := r.d.Inbox.List(ctx, ws, party, 0, false, limit+1)
	if err != nil {
		return nil, fmt.Errorf("dashboard inbox: %w", err)
	}
	in := &Inbox{Party: party}
	if len(entries) > limit {
		entries, in.More = entries[:limit], true
	}
	in.Count = len(entries)
	by := map[string][]inbox.Entry{}
	for _, e := range entries {
		by[e.Kind] = append(by[e.Kind], e)
		if e.Priority.Rank() >= event.Attention.Rank() {
			in.Needing++
		}
	}
	for _, k := range kindOrder {
		if len(by[k]) > 0 {
			in.Groups = append(in.Groups, KindGroup{Kind: k, Entries: by[k]})
			delete(by, k)
		}
	}
	rest := make([]string, 0, len(by))
	for k := range by {
		rest = append(rest, k)
	}
	slices.Sort(rest)
	for _, k := range rest {
		in.Groups = append(in.Groups, KindGroup{Kind: k, Entries: by[k]})
	}
	if r.d.Quiet != nil {
		qs, err := r.d.Quiet.QuietRecords(ctx, ws, now)
		if err != nil {
			return nil, fmt.Errorf("dashboard quiet: %w", err)
		}
		in.Quiet = quietFor(qs, party)
	}
	return in, nil
}

// Blockers counts the critical entries of in per subject.
func (in *Inbox) Blockers() map[string]int {
	m := map[string]int{}
	if in == nil {
		return m
	}
	for _, g := range in.Groups {
		for _, e := range g.Entries {
			if e.Priority == event.Critical {
				m[e.Subject]++
			}
		}
	}
	return m
}

// PR is one open pull request.
type PR struct {
	Subject   string
	Repo      string
	Number    int
	Title     string
	Author    string
	Head      string
	Draft     bool
	Checks    []Check
	Readiness string // ready | checks failed | changes requested | draft | waiting on <checks> | waiting for checks
	Ready     bool
	Session   string
	Stuck     bool
	Since     time.Time // when its head appeared
}

// Check is one check's latest result at head.
type Check struct {
	Name, Result string
}

// RepoPRs are the open PRs of one repository.
type RepoPRs struct {
	Repo string
	PRs  []PR
}

// PullRequests is a page of a workspace's open PRs by repository.
type PullRequests struct {
	Repos  []RepoPRs
	Count  int
	Total  int64
	Offset int
	Next   int
}

// PullRequests reads a page of a workspace's open PRs (merged and closed
// ones drop off), a few tracker reads at a time.
func (r *Reader) PullRequests(ctx context.Context, ws string, offset, limit int, now time.Time) (*PullRequests, error) {
	out := &PullRequests{Offset: offset}
	if r.d.Index == nil || r.d.PRs == nil {
		return out, nil
	}
	subjects, total, err := r.d.Index.PullRequests(ctx, ws, offset, limit)
	if err != nil {
		return nil, err
	}
	out.Total = total
	if int64(offset+len(subjects)) < total {
		out.Next = offset + len(subjects)
	}
	states := make([]*tracker.PRState, len(subjects))
	errs := make([]error, len(subjects))
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i, subj := range subjects {
		repo, n, ok := parsePR(subj)
		if !ok {
			continue
		}
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			st, err := r.d.PRs.State(ctx, repo, n)
			states[i], errs[i] = &st, err
		}()
	}
	wg.Wait()
	by := map[string][]PR{}
	for i, st := range states {
		if errs[i] != nil {
			return nil, fmt.Errorf("dashboard pr %s: %w", subjects[i], errs[i])
		}
		if st == nil || !st.Seen || st.State != "open" || (st.Workspace != "" && st.Workspace != ws) {
			continue
		}
		p := r.pr(subjects[i], st, now)
		by[p.Repo] = append(by[p.Repo], p)
		out.Count++
	}
	for repo, prs := range by {
		slices.SortFunc(prs, func(a, b PR) int { return a.Number - b.Number })
		out.Repos = append(out.Repos, RepoPRs{Repo: repo, PRs: prs})
	}
	slices.SortFunc(out.Repos, func(a, b RepoPRs) int { return strings.Compare(a.Repo, b.Repo) })
	return out, nil
}

func (r *Reader) pr(subject string, st *tracker.PRState, now time.Time) PR {
	p := PR{Subject: subject, Repo: st.Repo, Number: st.Number, Title: st.Title, Author: st.Author, Head: st.Head,
		Draft: st.Draft, Session: st.Session, Since: st.HeadSeenAt}
	var pending, failed []string
	last := st.HeadSeenAt
	for name, c := range st.Checks {
		p.Checks = append(p.Checks, Check{Name: name, Result: c.Result})
		switch c.Result {
		case "pending":
			pending = append(pending, name)
		case "fail":
			failed = append(failed, name)
		}
		if c.At.After(last) {
			last = c.At
		}
	}
	slices.SortFunc(p.Checks, func(a, b Check) int { return strings.Compare(a.Name, b.Name) })
	slices.Sort(pending)
	changes := false
	for _, v := range st.Reviews {
		changes = changes || v == "changes_requested"
	}
	p.Ready = st.Head != "" && slices.Contains(st.Ready, st.Head)
	switch {
	case p.Draft:
		p.Readiness = "draft"
	case len(failed) > 0 || (st.Head != "" && slices.Contains(st.Failed, st.Head)):
		p.Readiness = "checks failed"
		p.Ready = false
	case changes:
		p.Readiness = "changes requested"
		p.Ready = false
	case p.Ready:
		p.Readiness = "ready"
	case len(pending) > 0:
		p.Readiness = "waiting on " + strings.Join(pending, ", ")
	default:
		p.Readiness = "waiting for checks"
	}
	p.Stuck = !p.Draft && !last.IsZero() && now.Sub(last) > r.cfg.StuckAfter
	return p
}

func parsePR(subject string) (string, int, bool) {
	rest, ok := strings.CutPrefix(subject, "github:")
	if !ok {
		return "", 0, false
	}
	repo, num, ok := strings.Cut(rest, "#")
	var n int
	if _, err := fmt.Sscanf(num, "%d", &n); !ok || err != nil || n <= 0 || !strings.Contains(repo, "/") {
		return "", 0, false
	}
	return repo, n, true
}

// Invariant is one row of the health report.
type Invariant struct {
	ID       string            `json:"id"`
	Name     string            `json:"name"`
	OK       bool              `json:"ok"`
	Count    int64             `json:"count"`
	Unit     string            `json:"unit"`
	Examples []json.RawMessage `json:"examples"`
	Repaired int64             `json:"repaired"`
}

// HealthReport is the health report, violations first.
type HealthReport struct {
	OK         bool        `json:"ok"`
	Invariants []Invariant `json:"invariants"`
	LastSweep  time.Time   `json:"last_sweep"`
	Behind     bool        `json:"behind"`
}

// Health reads the workspace's health report; nil without a reporter.
func (r *Reader) Health(ctx context.Context, ws string, now time.Time) (*HealthReport, error) {
	if r.d.Health == nil {
		return nil, nil
	}
	v, err := r.d.Health.ReportJSON(ctx, ws, now)
	if err != nil {
		return nil, fmt.Errorf("dashboard health: %w", err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("dashboard health: %w", err)
	}
	var h HealthReport
	if err := json.Unmarshal(b, &h); err != nil {
		return nil, fmt.Errorf("dashboard health: %w", err)
	}
	slices.SortStableFunc(h.Invariants, func(a, b Invariant) int {
		switch {
		case a.OK == b.OK:
			return 0
		case !a.OK:
			return -1
		}
		return 1
	})
	return &h, nil
}

// Meaning says what a violation of an invariant means for a person.
func (i Invariant) Meaning() string {
	switch i.ID {
	case "I1":
		return "these sessions have nobody who hears them: set a controller or a workspace default"
	case "I2":
		return "entries nobody could hear in time, or that reached nobody at all: check the fallback and endpoints"
	case "I3":
		return "entries waiting for an ack (a measure, not a fault)"
	case "I4":
		return "two parties drove the same session in the last hour: they may be working against each other"
	case "I5":
		return "recipients woken more often than the workspace rate allows"
	case "I6":
		return "subscriptions still watching subjects that have ended"
	case "I7":
		return "parties with unacked entries and no reader seen: nobody is reading them"
	}
	return ""
}
