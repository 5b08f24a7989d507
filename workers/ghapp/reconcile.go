package ghapp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	wgh "github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/providers/github/app"
)

// prTracker records facts through the PR tracker (delivery/tracker): its
// script journals the fact's event once per fact id, with the terminal
// record DeathWatch reads.
type prTracker interface {
	Apply(ctx context.Context, workspace, guid string, f *wgh.Fact, now time.Time) (tracker.Result, error)
	State(ctx context.Context, repo string, number int) (tracker.PRState, error)
}

// terminals tells whether a subject has ended (delivery/journal).
type terminals interface {
	TerminalOf(ctx context.Context, workspace, subject string) (*journal.Terminal, error)
}

// subscribers finds the subscriptions an event would reach
// (delivery/subscriptions).
type subscribers interface {
	Match(ctx context.Context, e *event.Event, sessionLabels []string) ([]subscriptions.Subscription, error)
}

// ReconcileConfig tunes the reconciler. Zero values take the defaults.
type ReconcileConfig struct {
	Prefix string        // WAKEGATE_REDIS_PREFIX; default keyspace.DefaultPrefix
	Every  time.Duration // one pass per period across workers; default 5m
	// Overlap is how far before the last pass a pass looks again (clock
	// skew between GitHub and wakegate); default 2m.
	Overlap time.Duration
	// Grace keeps a watch just added from being pruned before the
	// subscription that asked for it is stored; default 1m.
	Grace time.Duration
	// MaxPages bounds the pages (100 closed PRs each) read per repository
	// per pass; default 3. Usually one is all there is.
	MaxPages int
	// BaselineAgain is how long after a baseline fetch the same PR is not
	// fetched again; default 1h.
	BaselineAgain time.Duration
	Now           func() time.Time
}

func (c ReconcileConfig) withDefaults() ReconcileConfig {
	if c.Prefix == "" {
		c.Prefix = keyspace.DefaultPrefix
	}
	if c.Every <= 0 {
		c.Every = 5 * time.Minute
	}
	if c.Overlap <= 0 {
		c.Overlap = 2 * time.Minute
	}
	if c.Grace <= 0 {
		c.Grace = time.Minute
	}
	if c.MaxPages <= 0 {
		c.MaxPages = 3
	}
	if c.BaselineAgain <= 0 {
		c.BaselineAgain = time.Hour
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Reconciler emits the terminal events of pull requests whose closing
// webhook never arrived, for the repositories someone watches: a repository
// is watched while a subscription on its PRs (an exact PR or its
// github:org/repo#* glob) or a PR linked to a session needs it. The watch
// index is "<prefix>:ghapp:watch"; the gateway adds to it when such a
// subscription is created or a PR is linked, and each pass drops what no
// longer needs watching.
type Reconciler struct {
	c          *app.Client
	rdb        redis.UniversalClient
	k          keys
	workspaces *wgh.RepoMap[string]
	tr         prTracker
	terms      terminals
	subs       subscribers
	cfg        ReconcileConfig
	log        *slog.Logger
	m          *reconcileMetrics
}

// NewReconciler returns a reconciler recording into tr; workspaces is
// WAKEGATE_WORKSPACES. Its metrics are registered on reg.
func NewReconciler(c *app.Client, rdb redis.UniversalClient, workspaces *wgh.RepoMap[string], tr prTracker, terms terminals,
	subs subscribers, log *slog.Logger, reg prometheus.Registerer, cfg ReconcileConfig) *Reconciler {
	cfg = cfg.withDefaults()
	return &Reconciler{c: c, rdb: rdb, k: keys{cfg.Prefix}, workspaces: workspaces, tr: tr, terms: terms, subs: subs,
		cfg: cfg, log: log.With("component", "github_reconcile"), m: newReconcileMetrics(reg)}
}

// repoRe is GitHub's owner/name grammar (as providers/github checks it).
var repoRe = regexp.MustCompile(`^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$`)

// parsePRSubject splits "github:org/repo#N" (n = N) and "github:org/repo#*"
// (n = 0).
func parsePRSubject(subject string) (repo string, n int, ok bool) {
	rest, ok := strings.CutPrefix(subject, "github:")
	if !ok {
		return "", 0, false
	}
	i := strings.LastIndexByte(rest, '#')
	if i < 0 || !repoRe.MatchString(rest[:i]) {
		return "", 0, false
	}
	repo, num := rest[:i], rest[i+1:]
	if num == "*" {
		return repo, 0, true
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 || strconv.Itoa(n) != num {
		return "", 0, false
	}
	return repo, n, true
}

// mapped reports whether repo's deliveries are journaled in workspace ws.
func (r *Reconciler) mapped(ws, repo string) bool {
	got, ok := r.workspaces.Lookup(repo)
	return ok && got == ws
}

// Watch notes that workspace ws needs subject — a PR (github:org/repo#N)
// or a repository's PRs (github:org/repo#*) — reconciled. Other subjects,
// and repositories that map to another workspace (whose events ws never
// sees), are ignored.
func (r *Reconciler) Watch(ctx context.Context, ws, subject string) error {
	repo, n, ok := parsePRSubject(subject)
	if !ok || !r.mapped(ws, repo) {
		return nil
	}
	member := watchMember(ws, repo, n)
	if err := r.rdb.ZAdd(ctx, r.k.watch(), redis.Z{Score: float64(r.cfg.Now().UnixMilli()), Member: member}).Err(); err != nil {
		return fmt.Errorf("watch %s: %w", subject, err)
	}
	return nil
}

func watchMember(ws, repo string, n int) string {
	num := "*"
	if n > 0 {
		num = strconv.Itoa(n)
	}
	return ws + "\t" + repo + "\t" + num
}

// Baseline is called when workspace ws subscribes to subject. It watches
// it, and when subject is an exact PR wakegate has never seen (no tracker
// state, no terminal record), fetches it once (GET
// /repos/{o}/{r}/pulls/{n}); a PR already closed or merged is recorded
// through the tracker, so the new subscription's DeathWatch finds its
// terminal record at once. An open PR is left to the webhooks and the
// reconciliation of its (now watched) repository.
func (r *Reconciler) Baseline(ctx context.Context, ws, subject string) error {
	if err := r.Watch(ctx, ws, subject); err != nil {
		return err
	}
	repo, n, ok := parsePRSubject(subject)
	if !ok || n == 0 || !r.mapped(ws, repo) {
		return nil
	}
	if t, err := r.terms.TerminalOf(ctx, ws, subject); err != nil || t != nil {
		return err
	}
	if st, err := r.tr.State(ctx, repo, n); err != nil || st.Seen {
		return err
	}
	first, err := r.rdb.SetNX(ctx, r.k.baseline(repo, n), r.cfg.Now().UnixMilli(), r.cfg.BaselineAgain).Result()
	if err != nil || !first {
		return err
	}
	outcome, err := r.baseline(ctx, ws, repo, n)
	if err != nil {
		// Not fetched: the next subscriber may try again.
		_ = r.rdb.Del(context.WithoutCancel(ctx), r.k.baseline(repo, n)).Err()
		r.m.baseline.WithLabelValues("error").Inc()
		return fmt.Errorf("baseline of %s: %w", subject, err)
	}
	r.m.baseline.WithLabelValues(outcome).Inc()
	return nil
}

func (r *Reconciler) baseline(ctx context.Context, ws, repo string, n int) (string, error) {
	owner, name, _ := app.SplitRepo(repo)
	g, err := r.c.Repo(ctx, repo)
	if err != nil {
		return "", err
	}
	pr, resp, err := g.PullRequests.Get(ctx, owner, name, n)
	if err != nil {
		if resp != nil && resp.StatusCode == http.StatusNotFound {
			return "open", nil // no such PR (yet): nothing to record
		}
		return "", err
	}
	if pr.GetState() != "closed" {
		return "open", nil
	}
	added, err := r.record(ctx, ws, repo, pr)
	if err != nil {
		return "", err
	}
	if added {
		r.m.closed.WithLabelValues("baseline").Inc()
	}
	return "closed", nil
}

// record journals pr's closed event through the tracker: added is false
// when that fact was journaled already (its webhook came, or an earlier
// pass).
func (r *Reconciler) record(ctx context.Context, ws, repo string, pr *gh.PullRequest) (bool, error) {
	f, err := app.ClosedFact(pr, repo)
	if err != nil {
		return false, err
	}
	// The tracker takes a delivery GUID for facts whose ids it derives;
	// a closed fact has its own id, so this only names where it came from.
	res, err := r.tr.Apply(ctx, ws, "api/pulls/"+strconv.Itoa(pr.GetNumber()), f, r.cfg.Now())
	if err != nil {
		return false, err
	}
	return len(res.Seqs) > 0, nil
}

// ReconcileReport is what one pass did.
type ReconcileReport struct {
	Repos  int // repositories polled
	Calls  int // list calls made
	Closed int // closed events journaled that no webhook had brought
	Pruned int // watches dropped (ended, or nobody needs them)
}

// Every is the period of the passes (ReconcileConfig.Every).
func (r *Reconciler) Every() time.Duration { return r.cfg.Every }

// Tick is one periodic pass (the worker's scheduler runs it once per
// Every() across all workers).
func (r *Reconciler) Tick(ctx context.Context, _ time.Time) error {
	rep, err := r.Reconcile(ctx)
	if rep.Closed > 0 {
		r.log.Info("reconciled pull requests closed without a webhook", "closed", rep.Closed, "repos", rep.Repos)
	}
	return err
}

// watched is one repository's watches.
type watched struct {
	ws      string
	prs     map[int]string // PR number → its watch member
	glob    string         // the github:org/repo#* member, "" if none
	firstMS int64          // oldest watch
}

// Reconcile makes one pass: it drops the watches nobody needs any more,
// then, per watched repository, one call — GET /repos/{o}/{r}/pulls
// ?state=closed&sort=updated&direction=desc — back to the last pass, and
// records through the tracker each watched PR closed since. A repository
// that fails is tried again from the same point next pass; the others go
// on.
func (r *Reconciler) Reconcile(ctx context.Context) (ReconcileReport, error) {
	var rep ReconcileReport
	start := r.cfg.Now()
	repos, err := r.watches(ctx)
	if err != nil {
		r.m.ticks.WithLabelValues("error").Inc()
		return rep, err
	}
	var errs []error
	for repo, w := range repos {
		pruned, err := r.prune(ctx, repo, w, start)
		rep.Pruned += pruned
		if err == nil && (len(w.prs) > 0 || w.glob != "") {
			rep.Repos++
			err = r.poll(ctx, repo, w, start, &rep)
		}
		if err == nil && len(w.prs) == 0 && w.glob == "" {
			err = r.rdb.HDel(ctx, r.k.reconcileSince(), repo).Err()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("reconcile %s: %w", repo, err))
		}
	}
	r.m.watched.Set(float64(rep.Repos))
	if len(errs) > 0 {
		r.m.ticks.WithLabelValues("error").Inc()
		return rep, errors.Join(errs...)
	}
	r.m.ticks.WithLabelValues("ok").Inc()
	return rep, nil
}

// watches reads the watch index by repository. A repository whose mapping
// moved to another workspace keeps only the watches of its current one.
func (r *Reconciler) watches(ctx context.Context) (map[string]*watched, error) {
	zs, err := r.rdb.ZRangeWithScores(ctx, r.k.watch(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("read watches: %w", err)
	}
	repos := map[string]*watched{}
	var stale []any
	for _, z := range zs {
		member, _ := z.Member.(string)
		parts := strings.Split(member, "\t")
		if len(parts) != 3 || !r.mapped(parts[0], parts[1]) {
			stale = append(stale, member)
			continue
		}
		ws, repo := parts[0], parts[1]
		n := 0
		if parts[2] != "*" {
			if n, err = strconv.Atoi(parts[2]); err != nil || n <= 0 {
				stale = append(stale, member)
				continue
			}
		}
		w := repos[repo]
		if w == nil {
			w = &watched{ws: ws, prs: map[int]string{}, firstMS: int64(z.Score)}
			repos[repo] = w
		}
		w.firstMS = min(w.firstMS, int64(z.Score))
		if n == 0 {
			w.glob = member
		} else {
			w.prs[n] = member
		}
	}
	if len(stale) > 0 {
		if err := r.rdb.ZRem(ctx, r.k.watch(), stale...).Err(); err != nil {
			return nil, fmt.Errorf("drop stale watches: %w", err)
		}
	}
	return repos, nil
}

// prune drops from w, and from the index, the watches nobody needs: an
// ended PR; a PR neither linked to a session nor subscribed to; a glob no
// subscription matches. Watches younger than Grace stay.
func (r *Reconciler) prune(ctx context.Context, repo string, w *watched, now time.Time) (int, error) {
	scores, err := r.scores(ctx, w)
	if err != nil {
		return 0, err
	}
	young := func(member string) bool {
		return now.Sub(time.UnixMilli(scores[member])) < r.cfg.Grace
	}
	var drop []any
	for n, member := range w.prs {
		if young(member) {
			continue
		}
		need, err := r.needPR(ctx, w.ws, repo, n)
		if err != nil {
			return 0, err
		}
		if !need {
			drop = append(drop, member)
			delete(w.prs, n)
		}
	}
	if w.glob != "" && !young(w.glob) {
		subs, err := r.subs.Match(ctx, closedProbe(w.ws, repo, 0), nil)
		if err != nil {
			return 0, err
		}
		if len(subs) == 0 {
			drop = append(drop, w.glob)
			w.glob = ""
		}
	}
	if len(drop) == 0 {
		return 0, nil
	}
	if err := r.rdb.ZRem(ctx, r.k.watch(), drop...).Err(); err != nil {
		return 0, fmt.Errorf("drop watches: %w", err)
	}
	return len(drop), nil
}

func (r *Reconciler) scores(ctx context.Context, w *watched) (map[string]int64, error) {
	members := make([]string, 0, len(w.prs)+1)
	for _, m := range w.prs {
		members = append(members, m)
	}
	if w.glob != "" {
		members = append(members, w.glob)
	}
	got, err := r.rdb.ZMScore(ctx, r.k.watch(), members...).Result()
	if err != nil {
		return nil, fmt.Errorf("read watches: %w", err)
	}
	out := make(map[string]int64, len(members))
	for i, m := range members {
		out[m] = int64(got[i])
	}
	return out, nil
}

// needPR reports whether PR n of repo still needs watching in ws: it has
// not ended, and it is linked to a session or someone subscribes to what
// its closing would be.
func (r *Reconciler) needPR(ctx context.Context, ws, repo string, n int) (bool, error) {
	subject := event.PRSubject(repo, n)
	t, err := r.terms.TerminalOf(ctx, ws, subject)
	if err != nil || t != nil {
		return false, err
	}
	st, err := r.tr.State(ctx, repo, n)
	if err != nil {
		return false, err
	}
	if st.Seen && st.State == "closed" {
		return false, nil
	}
	if st.Session != "" {
		return true, nil
	}
	subs, err := r.subs.Match(ctx, closedProbe(ws, repo, n), nil)
	return len(subs) > 0, err
}

// closedProbe is the closed event of PR n (0: any PR) of repo, as a
// subscription would be matched against it.
func closedProbe(ws, repo string, n int) *event.Event {
	data, _ := json.Marshal(map[string]any{"repo": repo, "number": n, "merged": true})
	typ := event.TypeGitHubPullRequestClosed
	return &event.Event{SpecVersion: event.SpecVersion, ID: "probe", Source: event.GitHubSource(repo), Type: typ,
		Subject: event.PRSubject(repo, n), Workspace: ws,
		Priority: event.DefaultPriority(typ, data), Terminal: true, Data: data}
}

// poll makes the repository's one call and records the watched PRs closed
// since its last pass.
func (r *Reconciler) poll(ctx context.Context, repo string, w *watched, start time.Time, rep *ReconcileReport) error {
	since := time.UnixMilli(w.firstMS)
	v, err := r.rdb.HGet(ctx, r.k.reconcileSince(), repo).Result()
	switch {
	case errors.Is(err, redis.Nil):
	case err != nil:
		return fmt.Errorf("read since: %w", err)
	default:
		if ms, perr := strconv.ParseInt(v, 10, 64); perr == nil {
			since = time.UnixMilli(ms)
		}
	}
	lower := since.Add(-r.cfg.Overlap)
	owner, name, _ := app.SplitRepo(repo)
	g, err := r.c.Repo(ctx, repo)
	if err != nil {
		return err
	}
	opts := &gh.PullRequestListOptions{State: "closed", Sort: "updated", Direction: "desc", ListOptions: gh.ListOptions{PerPage: 100}}
	var ended []any
	for page := 0; page < r.cfg.MaxPages; page++ {
		prs, resp, err := g.PullRequests.List(ctx, owner, name, opts)
		rep.Calls++
		r.m.calls.Inc()
		if err != nil {
			return fmt.Errorf("list closed pull requests: %w", err)
		}
		older := false
		for _, pr := range prs {
			if pr.GetUpdatedAt().Time.Before(lower) {
				older = true
				break
			}
			n := pr.GetNumber()
			member, exact := w.prs[n]
			if (!exact && w.glob == "") || pr.ClosedAt == nil {
				continue
			}
			added, err := r.record(ctx, w.ws, repo, pr)
			if err != nil {
				return err
			}
			if added {
				rep.Closed++
				r.m.closed.WithLabelValues("reconcile").Inc()
			}
			if exact {
				ended = append(ended, member)
				delete(w.prs, n)
			}
		}
		if older || resp.NextPage == 0 {
			break
		}
		if page == r.cfg.MaxPages-1 {
			r.log.Warn("more pull requests closed since the last pass than one pass reads; the oldest are left to their webhooks",
				"pages", r.cfg.MaxPages)
			break
		}
		opts.Page = resp.NextPage
	}
	if len(ended) > 0 {
		if err := r.rdb.ZRem(ctx, r.k.watch(), ended...).Err(); err != nil {
			return fmt.Errorf("drop ended watches: %w", err)
		}
		rep.Pruned += len(ended)
	}
	if err := r.rdb.HSet(ctx, r.k.reconcileSince(), repo, start.UnixMilli()).Err(); err != nil {
		return fmt.Errorf("store since: %w", err)
	}
	return nil
}
