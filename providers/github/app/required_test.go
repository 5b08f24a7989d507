package app

import (
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/wakegate/wakegate/providers/github/app/apptest"
)

// fakeClock is a settable clock.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newRequiredEnv(t *testing.T) (*apptest.GitHub, *Required, *fakeClock, *apptest.LogBuffer) {
	t.Helper()
	g := apptest.New(t)
	g.Install("org/repo", 7)
	clock := &fakeClock{t: time.Now()}
	log, logs := apptest.NewLog()
	configured := func(repo string) []string {
		if repo == "org/repo" || repo == "org/elsewhere" {
			return []string{"e2e"}
		}
		return nil
	}
	r := NewRequired(newTestClient(t, g), configured, log, prometheus.NewRegistry(),
		RequiredConfig{TTL: time.Hour, RetryAfter: time.Minute, Now: clock.Now})
	return g, r, clock, logs
}

// TestRequiredUnionCached: the required checks of a base are branch
// protection's contexts and checks ∪ every ruleset's required status
// checks ∪ the configured ones; fetched once per (repo, base) while
// fresh; refreshed in the background once stale, the stale set answered
// meanwhile.
func TestRequiredUnionCached(t *testing.T) {
	g, r, clock, logs := newRequiredEnv(t)
	g.SetProtection("org/repo", "main", []string{"ci/legacy"}, []string{"build", "lint"})
	g.SetRulesets("org/repo", "main", []string{"build", "test"}, []string{"security"})

	want := []string{"build", "ci/legacy", "e2e", "lint", "security", "test"}
	for range 3 {
		if got := r.Lookup("org/repo", "main"); !slices.Equal(got, want) {
			t.Fatalf("Lookup = %v, want %v", got, want)
		}
	}
	for route, n := range map[string]int{"protection": 1, "rules": 1, "installation": 1, "access_token": 1} {
		if got := g.Calls(route); got != n {
			t.Errorf("%s called %d times for three lookups, want %d", route, got, n)
		}
	}
	// Another base is another entry: unprotected (404 "Branch not
	// protected"), no rulesets; the token is reused.
	if got := r.Lookup("org/repo", "release"); !slices.Equal(got, []string{"e2e"}) {
		t.Fatalf("unprotected base: %v, want the configured checks only", got)
	}
	if g.Calls("protection") != 2 || g.Calls("access_token") != 1 {
		t.Fatalf("protection %d, tokens %d", g.Calls("protection"), g.Calls("access_token"))
	}

	// Stale: the old set at once, the new one after the background fetch.
	g.SetRulesets("org/repo", "main", []string{"build", "test", "new"})
	clock.Add(2 * time.Hour)
	if got := r.Lookup("org/repo", "main"); !slices.Equal(got, want) {
		t.Fatalf("stale lookup = %v, want the known set %v", got, want)
	}
	waitFor(t, "the refreshed set", func() bool {
		return slices.Equal(r.Lookup("org/repo", "main"), []string{"build", "ci/legacy", "e2e", "lint", "new", "test"})
	})
	if g.Calls("rules") != 3 {
		t.Fatalf("rules fetched %d times, want 3 (main, release, main refreshed)", g.Calls("rules"))
	}
	apptest.AssertNoSecrets(t, logs.String(), g)
}

// TestRequiredFallback: a fetch that fails answers the configured checks
// (or the last known set) at once, counts a fallback, and is not retried
// before RetryAfter; protection it may not read (403) leaves the rulesets;
// a repository the App is not installed on answers the configured checks.
func TestRequiredFallback(t *testing.T) {
	g, r, clock, logs := newRequiredEnv(t)
	g.SetProtection("org/repo", "main", nil, []string{"build"})
	g.SetRulesets("org/repo", "main", []string{"test"})

	g.Fail("rules", http.StatusInternalServerError)
	if got := r.Lookup("org/repo", "main"); !slices.Equal(got, []string{"e2e"}) {
		t.Fatalf("failed fetch: %v, want the configured checks", got)
	}
	if got := counterValue(t, r.m.fallbacks); got != 1 {
		t.Fatalf("fallbacks %v, want 1", got)
	}
	start := time.Now()
	for range 5 {
		if got := r.Lookup("org/repo", "main"); !slices.Equal(got, []string{"e2e"}) {
			t.Fatalf("within RetryAfter: %v", got)
		}
	}
	if g.Calls("rules") != 1 || time.Since(start) > time.Second {
		t.Fatalf("within RetryAfter: %d fetches in %v, want none more, at once", g.Calls("rules")-1, time.Since(start))
	}

	g.Fail("rules", 0)
	clock.Add(2 * time.Minute)
	r.Lookup("org/repo", "main") // retried in the background
	waitFor(t, "the set after GitHub recovered", func() bool {
		return slices.Equal(r.Lookup("org/repo", "main"), []string{"build", "e2e", "test"})
	})

	// Known set, then failures: the last known set stands.
	g.Fail("rules", http.StatusBadGateway)
	clock.Add(2 * time.Hour)
	calls := g.Calls("rules")
	r.Lookup("org/repo", "main")
	waitFor(t, "the failed refresh", func() bool { return counterValue(t, r.m.fallbacks) == 2 })
	if got := r.Lookup("org/repo", "main"); !slices.Equal(got, []string{"build", "e2e", "test"}) || g.Calls("rules") != calls+1 {
		t.Fatalf("after a failed refresh: %v, want the last known set", got)
	}

	// No Administration: read: protection answers 403, rulesets count.
	g.Fail("rules", 0)
	g.Fail("protection", http.StatusForbidden)
	g.SetRulesets("org/repo", "dev", []string{"lint"})
	if got := r.Lookup("org/repo", "dev"); !slices.Equal(got, []string{"e2e", "lint"}) {
		t.Fatalf("protection unreadable: %v, want rulesets ∪ configured", got)
	}

	if got := r.Lookup("org/elsewhere", "main"); !slices.Equal(got, []string{"e2e"}) {
		t.Fatalf("not installed: %v", got)
	}
	if got := counterValue(t, r.m.fetches.WithLabelValues("not_installed")); got != 1 {
		t.Fatalf("not_installed fetches %v, want 1", got)
	}
	apptest.AssertNoSecrets(t, logs.String(), g)
}
