package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	gh "github.com/google/go-github/v66/github"
	"github.com/prometheus/client_golang/prometheus"
)

// RequiredConfig tunes Required. Zero values take the defaults.
type RequiredConfig struct {
	// TTL is how long a fetched set is fresh; default 5m. A stale set is
	// still answered while it is fetched again in the background.
	TTL time.Duration
	// RetryAfter is how long after a failed fetch the next one is tried;
	// default 1m. Until then lookups answer the fallback at once.
	RetryAfter time.Duration
	// Timeout bounds a fetch (a first lookup waits for it); default 5s.
	Timeout time.Duration
	Now     func() time.Time
}

func (c RequiredConfig) withDefaults() RequiredConfig {
	if c.TTL <= 0 {
		c.TTL = 5 * time.Minute
	}
	if c.RetryAfter <= 0 {
		c.RetryAfter = time.Minute
	}
	if c.Timeout <= 0 {
		c.Timeout = 5 * time.Second
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

// Required answers which checks a base branch of a repository requires:
// the union of its branch protection's required status checks (contexts
// and checks), the required_status_checks rules of every ruleset that
// applies to it, and the configured ones (WAKEGATE_REQUIRED_CHECKS). It
// caches per (repository, base) in memory. A fetch that fails never holds
// readiness back for long: the lookup answers the last set it knew, or the
// configured checks alone, logs, counts, and tries again RetryAfter later.
type Required struct {
	c          *Client
	configured func(repo string) []string
	cfg        RequiredConfig
	log        *slog.Logger
	m          *requiredMetrics

	mu      sync.Mutex
	entries map[requiredKey]*requiredEntry
}

type requiredKey struct{ repo, base string }

type requiredEntry struct {
	names   []string      // from GitHub; nil until a fetch succeeded
	known   bool          // a fetch has succeeded once
	tried   bool          // a fetch has ended once, well or not
	fresh   time.Time     // until when names (or the failure) stands
	loading chan struct{} // closed when the fetch under way ends; nil when none
}

// NewRequired returns the lookup; configured gives WAKEGATE_REQUIRED_CHECKS'
// names for a repository (nil: none).
func NewRequired(c *Client, configured func(repo string) []string, log *slog.Logger, reg prometheus.Registerer, cfg RequiredConfig) *Required {
	if configured == nil {
		configured = func(string) []string { return nil }
	}
	return &Required{c: c, configured: configured, cfg: cfg.withDefaults(),
		log: log.With("component", "github_required"), m: newRequiredMetrics(reg), entries: map[requiredKey]*requiredEntry{}}
}

// Lookup returns the required check names of base in repo, sorted. It is
// the PR tracker's Config.Required: cheap once cached. The first lookup of
// a (repo, base) waits for the fetch (at most cfg.Timeout); after that a
// stale set is answered at once and refreshed in the background.
func (r *Required) Lookup(repo, base string) []string {
	names := r.fromGitHub(repo, base)
	return union(r.configured(repo), names)
}

func (r *Required) fromGitHub(repo, base string) []string {
	k := requiredKey{repo, base}
	now := r.cfg.Now()
	r.mu.Lock()
	e := r.entries[k]
	if e == nil {
		e = &requiredEntry{}
		r.entries[k] = e
	}
	switch {
	case e.loading != nil && !e.tried:
		// The first fetch of this set is under way: wait for it.
		wait := e.loading
		r.mu.Unlock()
		select {
		case <-wait:
		case <-time.After(r.cfg.Timeout):
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		return e.names
	case e.loading != nil || now.Before(e.fresh):
		defer r.mu.Unlock()
		return e.names
	}
	e.loading = make(chan struct{})
	if e.tried {
		// Stale, or failed before: answer what is known at once and
		// fetch meanwhile, so a GitHub outage never holds lookups up.
		names := e.names
		r.mu.Unlock()
		go r.refresh(k, e)
		return names
	}
	r.mu.Unlock()
	r.refresh(k, e)
	r.mu.Lock()
	defer r.mu.Unlock()
	return e.names
}

// refresh fetches k's set and stores it in e, then ends e's loading.
func (r *Required) refresh(k requiredKey, e *requiredEntry) {
	ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
	defer cancel()
	names, err := r.fetch(ctx, k.repo, k.base)
	now := r.cfg.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	defer func() { close(e.loading); e.loading, e.tried = nil, true }()
	if err == nil {
		e.names, e.known, e.fresh = names, true, now.Add(r.cfg.TTL)
		r.m.fetches.WithLabelValues("ok").Inc()
		return
	}
	e.fresh = now.Add(r.cfg.RetryAfter)
	r.m.fallbacks.Inc()
	if errors.Is(err, ErrNotInstalled) {
		r.m.fetches.WithLabelValues("not_installed").Inc()
	} else {
		r.m.fetches.WithLabelValues("error").Inc()
	}
	fallback := "WAKEGATE_REQUIRED_CHECKS"
	if e.known {
		fallback = "the last known set"
	}
	r.log.Warn("required checks not fetched; answering "+fallback+" meanwhile", "base", k.base, "err", err)
}

// fetch reads branch protection and the rules for the branch.
func (r *Required) fetch(ctx context.Context, repo, base string) ([]string, error) {
	owner, name, ok := SplitRepo(repo)
	if !ok {
		return nil, fmt.Errorf("repository %q: want org/repo", repo)
	}
	g, err := r.c.Repo(ctx, repo)
	if err != nil {
		return nil, err
	}
	var names []string
	p, resp, err := g.Repositories.GetBranchProtection(ctx, owner, name, base)
	switch {
	case errors.Is(err, gh.ErrBranchNotProtected):
	case err != nil && resp != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusForbidden):
		// Reading classic protection needs Administration: read; without
		// it GitHub answers 403 or 404. Rulesets need only Metadata, so
		// they still count.
		r.log.Debug("branch protection not readable; using rulesets only", "base", base, "status", resp.StatusCode)
	case err != nil:
		return nil, fmt.Errorf("branch protection of %s %s: %w", repo, base, err)
	case p.RequiredStatusChecks != nil:
		rsc := p.RequiredStatusChecks
		if rsc.Contexts != nil {
			names = append(names, *rsc.Contexts...)
		}
		if rsc.Checks != nil {
			for _, c := range *rsc.Checks {
				if c != nil {
					names = append(names, c.Context)
				}
			}
		}
	}
	rules, err := r.rules(ctx, g, owner, name, base)
	if err != nil {
		return nil, err
	}
	return union(names, rules), nil
}

// rules reads GET /repos/{o}/{r}/rules/branches/{branch}, every page: the
// active rules of every repository and organization ruleset that applies
// to the branch. (go-github v66's GetRulesForBranch neither escapes the
// branch nor pages, so the request is built here.)
func (r *Required) rules(ctx context.Context, g *gh.Client, owner, name, base string) ([]string, error) {
	var names []string
	for page := 1; page > 0; {
		u := fmt.Sprintf("repos/%s/%s/rules/branches/%s?per_page=100&page=%d",
			url.PathEscape(owner), url.PathEscape(name), url.PathEscape(base), page)
		req, err := g.NewRequest(http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		var rules []*gh.RepositoryRule
		resp, err := g.Do(ctx, req, &rules)
		if err != nil {
			return nil, fmt.Errorf("rules of %s/%s %s: %w", owner, name, base, err)
		}
		for _, rule := range rules {
			if rule == nil || rule.Type != "required_status_checks" || rule.Parameters == nil {
				continue
			}
			var p gh.RequiredStatusChecksRuleParameters
			if err := json.Unmarshal(*rule.Parameters, &p); err != nil {
				return nil, fmt.Errorf("rules of %s/%s %s: required_status_checks parameters: %w", owner, name, base, err)
			}
			for _, c := range p.RequiredStatusChecks {
				names = append(names, c.Context)
			}
		}
		page = resp.NextPage
	}
	return names, nil
}

// union returns the distinct non-empty names of a and b, sorted; nil when
// there are none.
func union(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	for _, n := range slices.Concat(a, b) {
		if n != "" {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	out = slices.Compact(out)
	if len(out) == 0 {
		return nil
	}
	return out
}
