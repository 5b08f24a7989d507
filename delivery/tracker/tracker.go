// Package tracker is wakegate's PR tracker (docs/design.md §3): per pull request it
// keeps state, draft, head, base, reviews and per-sha check results, and
// derives from them the synthesized events github.pull_request.ready (once
// per head sha) and github.pull_request.checks_failed, plus the link of a
// PR to the session that opened it.
//
// Every fact is applied by one Lua script that updates the tracker and
// journals, in the same atomic step, the delivery's own event(s) and what
// it synthesizes: concurrent gateways never double-emit or lose an event,
// and re-applying a delivery changes nothing. All state of a repository
// lives under the hash tag of its journal shard (journal.Tag), so each
// script runs in one cluster slot.
//
// It imports the event contract, the journal and the GitHub normalizer's
// Fact; it must not import the gateway or the workers.
package tracker

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/providers/kind"
)

var (
	//go:embed tracker.lua
	trackerLua string
	//go:embed apply.lua
	applyLua string
	//go:embed apply_one.lua
	applyOneLua string
	//go:embed apply_batch.lua
	applyBatchLua string
	//go:embed settle.lua
	settleLua string
	//go:embed claim.lua
	claimLua string

	applyScript  = keyspace.NewScript("delivery/tracker/apply_one.lua", journal.AppendLua, trackerLua, applyLua, applyOneLua)
	batchScript  = keyspace.NewScript("delivery/tracker/apply_batch.lua", journal.AppendLua, trackerLua, applyLua, applyBatchLua)
	settleScript = keyspace.NewScript("delivery/tracker/settle.lua", journal.AppendLua, trackerLua, settleLua)
	claimScript  = keyspace.NewScript("delivery/tracker/claim.lua", journal.AppendLua, trackerLua, claimLua)
)

// ErrInvalidFact is wrapped by Apply's error for a fact it cannot fold in
// (missing fields, data that is not JSON). Nothing was written.
var ErrInvalidFact = kind.New(kind.Invalid, "tracker: invalid fact")

// ErrLinkConflict is wrapped by Claim's error when the PR is already linked
// to another session.
var ErrLinkConflict = kind.New(kind.Conflict, "pull request linked to another session")

// Config tunes the tracker.
type Config struct {
	// Settle is how long a head with no required checks and nothing
	// reported must wait before it counts as ready (WAKEGATE_READY_SETTLE).
	// Default 60s.
	Settle time.Duration
	// Required returns the names of the checks (check runs by name, commit
	// statuses by context) required for a base branch of a repository
	// (WAKEGATE_REQUIRED_CHECKS). It is called on every Apply for the bases
	// involved, so it should be cheap (cache lookups). Nil means none.
	Required func(repo, base string) []string
	// Retention is how long per-sha check results, the sha index and the
	// tracker of a closed PR are kept after their last update. Default 30
	// days.
	Retention time.Duration
	// Logger receives RunSettler's errors. Default: discarded.
	Logger *slog.Logger
	// KnownSession reports whether a session of a workspace is known to
	// the session registry; a Wakegate-Session trailer naming an unknown
	// one links nothing (docs/design.md §3). Nil: every trailer names an
	// unknown session.
	KnownSession func(ctx context.Context, workspace, id string) (bool, error)
}

func (c Config) withDefaults() Config {
	if c.Settle <= 0 {
		c.Settle = 60 * time.Second
	}
	if c.Retention <= 0 {
		c.Retention = 30 * 24 * time.Hour
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Tracker folds GitHub facts into per-PR state in Redis. It is safe for
// concurrent use, and any number of processes may share one Redis.
type Tracker struct {
	rdb redis.UniversalClient
	j   *journal.Journal
	cfg Config

	mu    sync.Mutex
	bases map[string]map[string]struct{} // repo → base branches seen
}

// New returns a tracker on rdb that journals into j.
func New(rdb redis.UniversalClient, j *journal.Journal, cfg Config) *Tracker {
	return &Tracker{rdb: rdb, j: j, cfg: cfg.withDefaults(), bases: map[string]map[string]struct{}{}}
}

// Result is what one Apply did.
type Result struct {
	// Seqs are the journal seqs this call appended, in order: the
	// delivery's own event(s), then what it synthesized. Empty when it was
	// all there already.
	Seqs []string
}

// scriptCtx is what every tracker script reads besides its own input. The
// batch apply passes it beside each input, the same string for the facts
// of one repository (decoded once), and leaves it out of the input.
type scriptCtx struct {
	NowMS     int64               `json:"now_ms,omitempty"`
	NowTime   string              `json:"now_time,omitempty"`
	SettleMS  int64               `json:"settle_ms,omitempty"`
	Retention int64               `json:"retention,omitempty"`
	Req       map[string][]string `json:"req,omitempty"`
}

// applyInput is ARGV[5] of apply.lua.
type applyInput struct {
	scriptCtx
	Workspace   string `json:"workspace"`
	Repo        string `json:"repo"`
	GUID        string `json:"guid"`
	Source      string `json:"source"`
	Type        string `json:"type"`
	Subject     string `json:"subject"`
	ID          string `json:"id"`
	Time        string `json:"time,omitempty"`
	Priority    string `json:"priority,omitempty"`
	CoalesceKey string `json:"coalescekey,omitempty"`
	Terminal    bool   `json:"terminal,omitempty"`
	Summary     string `json:"summary,omitempty"`
	// EvAt > 0: the script's data argument is the own event itself, built
	// here (ownEvent), and its sessionid goes after its first EvAt bytes.
	EvAt       int          `json:"ev_at,omitempty"`
	Number     int          `json:"number"`
	ShaSubject string       `json:"sha_subject"`
	DeploySHA  string       `json:"deploy_sha,omitempty"` // a deployment status: the sha deployed
	PR         *prInput     `json:"pr,omitempty"`
	Check      *checkInput  `json:"check,omitempty"`
	Review     *reviewInput `json:"review,omitempty"`
}

type prInput struct {
	Number    int    `json:"number"`
	Action    string `json:"action"`
	State     string `json:"state"`
	Draft     bool   `json:"draft"`
	Merged    bool   `json:"merged"`
	Head      string `json:"head"`
	Base      string `json:"base"`
	Author    string `json:"author"`
	Title     string `json:"title"`
	Labels    string `json:"labels"` // JSON array, stored as is
	UpdatedMS int64  `json:"updated_ms"`
	// Trailer is the session the body's Wakegate-Session line names;
	// TrailerKnown whether the registry knows it (read before the script:
	// the registry lives in other slots).
	Trailer      string `json:"trailer,omitempty"`
	TrailerKnown bool   `json:"trailer_known,omitempty"`
	ServerSource string `json:"server_source"`
}

type checkInput struct {
	SHA    string `json:"sha"`
	Name   string `json:"name"`
	Suite  bool   `json:"suite"`
	Result string `json:"result"`
	AtMS   int64  `json:"at_ms"`
	PRs    []int  `json:"prs"`
}

type reviewInput struct {
	Number   int    `json:"number"`
	Reviewer string `json:"reviewer"`
	State    string `json:"state"`
	AtMS     int64  `json:"at_ms"`
}

// Apply folds one normalized delivery into the tracker of its repository
// and journals, in one atomic script, the delivery's own event(s) and what
// it synthesizes (ready, checks_failed). guid is the delivery's
// X-GitHub-Delivery; now is when it is applied (a new head's settle clock
// starts there).
//
// The own event goes to f.Subject, or, for a check or status, to every PR
// it resolves to (the payload's PRs and the sha index) with id
// "<guid>/<n>", or once to the sha subject with id "<guid>" when no PR is
// known. It carries sessionid when its PR is linked to a session of this
// workspace. A deployment status keeps its sha subject; the PRs whose head
// the sha is or was (the sha index) are listed in its data.pull_requests,
// and it carries the sessionid of the first of them linked to a session,
// so the router reaches them too.
//
// Apply is idempotent: re-applying the same (guid, fact) changes nothing
// and appends nothing. A fact with Ignored set, or with nothing to track
// and nothing to journal, is a no-op.
func (t *Tracker) Apply(ctx context.Context, workspace, guid string, f *github.Fact, now time.Time) (Result, error) {
	if f == nil || f.Ignored != "" || (f.Type == "" && f.PR == nil && f.Check == nil && f.Review == nil) {
		return Result{}, nil
	}
	in, data, err := t.applyInput(ctx, workspace, guid, f, now)
	if err != nil {
		return Result{}, err
	}
	shard := t.shardOf(f.Repo)
	if f.Repo == "" { // not about a repository (installation): journal only
		shard = t.j.ShardOf(workspace, f.Subject)
	}
	var hint []string
	if f.PR != nil {
		hint = []string{f.PR.Base}
	}
	res, err := t.run(ctx, applyScript, shard, f.Repo, hint, func(req map[string][]string) ([]any, error) {
		in.Req = req
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode input: %w", err)
		}
		return []any{string(b), data}, nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("apply %s delivery %s: %w", f.Event, guid, err)
	}
	return Result{Seqs: seqs(shard, res[1:])}, nil
}

// applyInput validates f and builds the script's input and raw data.
func (t *Tracker) applyInput(ctx context.Context, workspace, guid string, f *github.Fact, now time.Time) (*applyInput, string, error) {
	invalid := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrInvalidFact, fmt.Sprintf(format, args...))
	}
	switch {
	case !event.ValidWorkspace(workspace):
		return nil, "", invalid("workspace %q", workspace)
	case guid == "" || strings.ContainsAny(guid, "{}"):
		return nil, "", invalid("delivery guid %q", guid)
	case f.Repo == "" && (f.PR != nil || f.Check != nil || f.Review != nil):
		return nil, "", invalid("%s.%s: tracker input without a repository", f.Event, f.Action)
	case strings.ContainsAny(f.Repo, "{}\n#@"):
		return nil, "", invalid("repository %q", f.Repo)
	case f.Type != "" && !event.ValidType(f.Type):
		return nil, "", invalid("type %q", f.Type)
	case f.Type != "" && f.Subject == "" && f.Check == nil:
		return nil, "", invalid("%s: no subject", f.Type)
	case len(f.Data) > 0 && !json.Valid(f.Data):
		return nil, "", invalid("%s: data is not JSON", f.Type)
	}
	if f.Type == "" && f.Repo == "" {
		return nil, "", invalid("%s.%s: nothing to do", f.Event, f.Action)
	}
	at := f.Time
	if at.IsZero() {
		at = now
	}
	priority := f.Priority
	if priority == "" && f.Type != "" {
		priority = event.DefaultPriority(f.Type, f.Data)
	}
	in := &applyInput{
		scriptCtx:   t.scriptCtx(now),
		Workspace:   workspace,
		Repo:        f.Repo,
		GUID:        guid,
		Source:      event.GitHubSource(f.Repo),
		Type:        f.Type,
		Subject:     f.Subject,
		ID:          f.ID,
		Time:        at.UTC().Format(time.RFC3339Nano),
		Priority:    string(priority),
		CoalesceKey: f.CoalesceKey,
		Terminal:    f.Terminal,
		Summary:     f.Summary,
		Number:      subjectNumber(f),
	}
	if f.Repo == "" {
		in.Source = "//github.com"
	}
	if f.Type == event.TypeGitHubDeploymentStatus && f.Repo != "" {
		// It also reaches the PRs whose head is its sha (docs/design.md §3).
		in.DeploySHA, _ = strings.CutPrefix(f.Subject, "github:"+f.Repo+"@")
		if in.DeploySHA == f.Subject || strings.ContainsAny(in.DeploySHA, "{}\n") {
			in.DeploySHA = ""
		}
	}
	switch {
	case f.PR != nil:
		p := f.PR
		if p.Number <= 0 || (p.State != "open" && p.State != "closed") {
			return nil, "", invalid("pull request #%d state %q", p.Number, p.State)
		}
		labels := p.Labels
		if labels == nil {
			labels = []string{}
		}
		lb, _ := json.Marshal(labels)
		in.PR = &prInput{
			Number: p.Number, Action: p.Action, State: p.State, Draft: p.Draft, Merged: p.Merged,
			Head: p.Head, Base: p.Base, Author: p.Author, Title: p.Title,
			Labels: string(lb), UpdatedMS: millis(p.UpdatedAt), ServerSource: event.ServerSource(workspace),
		}
		if p.Trailer != "" && event.ValidID(p.Trailer) {
			in.PR.Trailer = p.Trailer
			if t.cfg.KnownSession != nil {
				known, err := t.cfg.KnownSession(ctx, workspace, p.Trailer)
				if err != nil {
					return nil, "", fmt.Errorf("session %s of the trailer: %w", p.Trailer, err)
				}
				in.PR.TrailerKnown = known
			}
		}
	case f.Check != nil:
		c := f.Check
		switch {
		case c.SHA == "" || c.Name == "" || strings.ContainsAny(c.SHA, "{}\n"):
			return nil, "", invalid("check %q at %q", c.Name, c.SHA)
		case c.Result != github.ResultPass && c.Result != github.ResultFail && c.Result != github.ResultPending:
			return nil, "", invalid("check %q result %q", c.Name, c.Result)
		}
		prs := make([]int, 0, len(c.PRs))
		for _, n := range c.PRs {
			if n > 0 {
				prs = append(prs, n)
			}
		}
		in.Check = &checkInput{SHA: c.SHA, Name: c.Name, Suite: c.Suite, Result: c.Result, AtMS: millis(c.At), PRs: prs}
		in.ShaSubject = event.ShaSubject(f.Repo, c.SHA)
	case f.Review != nil:
		r := f.Review
		if r.Number <= 0 || r.Reviewer == "" {
			return nil, "", invalid("review of #%d by %q", r.Number, r.Reviewer)
		}
		in.Review = &reviewInput{Number: r.Number, Reviewer: r.Reviewer, State: r.State, AtMS: millis(r.At)}
	}
	data := string(f.Data)
	if in.Type != "" && in.DeploySHA == "" && (in.Subject != "" || in.Check == nil) {
		// apply.lua's own event about the fact's subject: built here
		data = in.ownEvent(data)
	}
	return in, data, nil
}

// ownEvent builds the delivery's own event about in.Subject as the
// journal stores it (journal.Entry: the compact entry of docs/design.md
// §14 "Journal entries" for a GitHub subject), without its sessionid: the
// script knows the PR's link and splices it in after the first in.EvAt
// bytes. Lua builds every string it makes in full, hashing each byte;
// here it costs the worker far less than it cost Redis. The fields only
// the entry needed leave the input (the script keeps time and summary of
// a terminal event for its terminal record).
func (in *applyInput) ownEvent(data string) string {
	id := in.ID
	if id == "" {
		id = in.GUID
	}
	ev, at := journal.Entry(journal.EntryFields{ID: id, Source: in.Source, Type: in.Type, Subject: in.Subject,
		Time: in.Time, Priority: in.Priority, CoalesceKey: in.CoalesceKey, Terminal: in.Terminal,
		Summary: in.Summary, Data: data})
	in.EvAt = at
	in.Priority, in.CoalesceKey = "", ""
	if !in.Terminal {
		in.Time, in.Summary = "", ""
	}
	return ev
}

// subjectNumber is the PR the fact's subject names (for its link), or 0.
func subjectNumber(f *github.Fact) int {
	switch {
	case f.PR != nil:
		return f.PR.Number
	case f.Review != nil:
		return f.Review.Number
	}
	rest, ok := strings.CutPrefix(f.Subject, "github:"+f.Repo+"#")
	if !ok || f.Repo == "" {
		return 0
	}
	n, err := strconv.Atoi(rest)
	if err != nil || n <= 0 {
		return 0
	}
	return n
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func (t *Tracker) scriptCtx(now time.Time) scriptCtx {
	return scriptCtx{
		NowMS:     now.UnixMilli(),
		NowTime:   now.UTC().Format(time.RFC3339Nano),
		SettleMS:  t.cfg.Settle.Milliseconds(),
		Retention: int64(t.cfg.Retention / time.Second),
	}
}

// maxNeed bounds the rounds of "need required checks of base X": one is
// usual (a base first met through a check), a second only when a PR's
// base changed in between.
const maxNeed = 4

// run runs a tracker script for repo's shard with the required checks of
// the bases it may evaluate. The scripts answer {"need", base...} before
// writing anything when a base is missing; run then adds it and retries.
// args builds ARGV[5:] from the required checks.
func (t *Tracker) run(ctx context.Context, s *keyspace.Script, shard int, repo string, hint []string,
	args func(req map[string][]string) ([]any, error)) ([]any, error) {
	t.remember(repo, hint)
	for range maxNeed {
		extra, err := args(t.required(repo))
		if err != nil {
			return nil, err
		}
		argv := append(t.j.AppendArgs(), t.j.Tag(shard))
		argv = append(argv, extra...)
		res, err := s.Run(ctx, t.rdb, []string{t.j.StreamKey(shard)}, argv...).Slice()
		if err != nil {
			return nil, err
		}
		if len(res) == 0 {
			return nil, errors.New("empty script reply")
		}
		if status, _ := res[0].(string); status != "need" {
			return res, nil
		}
		t.rememberNeed(repo, res)
	}
	return nil, errors.New("required checks still missing after retries")
}

// rememberNeed remembers the bases a script's {"need", base...} reply
// names, so the next call passes their required checks.
func (t *Tracker) rememberNeed(repo string, reply []any) {
	var bases []string
	for _, b := range reply[1:] {
		if s, ok := b.(string); ok {
			bases = append(bases, s)
		}
	}
	t.remember(repo, bases)
}

// maxRemembered bounds the memo of base branches (it is only a hint:
// forgetting costs one more round trip).
const maxRemembered = 10000

// remember notes base branches of repo, so later scripts get their
// required checks up front.
func (t *Tracker) remember(repo string, bases []string) {
	if t.cfg.Required == nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, b := range bases {
		if b == "" {
			continue
		}
		m := t.bases[repo]
		if m == nil {
			if len(t.bases) >= maxRemembered {
				clear(t.bases)
			}
			m = map[string]struct{}{}
			t.bases[repo] = m
		}
		m[b] = struct{}{}
	}
}

// required returns the required checks of every base of repo seen so far;
// with no Required function, "*" → none.
func (t *Tracker) required(repo string) map[string][]string {
	if t.cfg.Required == nil {
		return map[string][]string{"*": {}}
	}
	t.mu.Lock()
	bases := make([]string, 0, len(t.bases[repo]))
	for b := range t.bases[repo] {
		bases = append(bases, b)
	}
	t.mu.Unlock()
	req := make(map[string][]string, len(bases))
	for _, b := range bases {
		names := t.cfg.Required(repo, b)
		if names == nil {
			names = []string{}
		}
		req[b] = names
	}
	return req
}

// seqs turns stream ids a script returned into journal seqs.
func seqs(shard int, ids []any) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if s, ok := id.(string); ok && s != "" {
			out = append(out, journal.FormatSeq(shard, s))
		}
	}
	return out
}
