package stack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/providers/github/app"
	"github.com/wakegate/wakegate/workers/ghapp"
)

// GitHubApp is the GitHub App side of a stack (docs/design.md §11, packages
// providers/github/app and workers/ghapp): required checks for the tracker, the
// missed-delivery sweep and the reconciliation for the workers, the admin
// route and the baseline fetch for the gateway.
type GitHubApp struct {
	Client    *app.Client
	Required  *app.Required
	Sweep     *ghapp.Sweeper
	Reconcile *ghapp.Reconciler

	workspaces *github.RepoMap[string]
	prefix     string
}

// newGitHubApp builds the App's parts that need no stack, or returns nil
// (and says so, once) when no private key is configured.
func newGitHubApp(rdb redis.UniversalClient, cfg Config, configured func(repo string) []string,
	log *slog.Logger, reg prometheus.Registerer) (*GitHubApp, error) {
	if len(cfg.GitHubApp.PrivateKey) == 0 {
		log.Info("GitHub App features are off (no WAKEGATE_GITHUB_APP_PRIVATE_KEY): no missed-delivery sweep, " +
			"no reconciliation or baseline fetch, required checks from WAKEGATE_REQUIRED_CHECKS only")
		return nil, nil
	}
	c, err := app.NewClient(cfg.GitHubApp)
	if err != nil {
		return nil, err
	}
	spec := cfg.Workspaces
	if spec == "" {
		spec = "*=default"
	}
	workspaces, err := github.ParseWorkspaces(spec, event.ValidWorkspace)
	if err != nil {
		return nil, fmt.Errorf("WAKEGATE_WORKSPACES: %w", err)
	}
	api := cfg.GitHubApp.APIURL
	if api == "" {
		api = app.DefaultAPIURL
	}
	log.Info("GitHub App features are on", "app_id", cfg.GitHubApp.AppID, "api_url", api)
	return &GitHubApp{
		Client:     c,
		Required:   app.NewRequired(c, configured, log, reg, app.RequiredConfig{}),
		Sweep:      ghapp.NewSweeper(c, rdb, log, reg, ghapp.SweepConfig{Prefix: cfg.Prefix}),
		workspaces: workspaces,
		prefix:     cfg.Prefix,
	}, nil
}

// reconciler adds the part that records through the stack's tracker.
func (g *GitHubApp) reconciler(s *Stack) {
	g.Reconcile = ghapp.NewReconciler(g.Client, s.Redis, g.workspaces, s.Tracker, s.Journal, s.Subs, s.Log, s.Metrics,
		ghapp.ReconcileConfig{Prefix: g.prefix})
}

// watchingLinker is the tracker's PR ↔ session link that also watches a
// linked PR for reconciliation: a linked PR's repository is polled until
// the PR ends.
type watchingLinker struct {
	*tracker.Tracker
	recon *ghapp.Reconciler
	log   *slog.Logger
}

// Claim links the PR (tracker.Claim), then watches it.
func (w watchingLinker) Claim(ctx context.Context, workspace, repo string, number int, session string, now time.Time) (string, error) {
	holder, err := w.Tracker.Claim(ctx, workspace, repo, number, session, now)
	if err == nil || errors.Is(err, tracker.ErrLinkConflict) {
		if werr := w.recon.Watch(ctx, workspace, event.PRSubject(repo, number)); werr != nil {
			w.log.Warn("watch linked pull request", "subject", event.PRSubject(repo, number), "err", werr)
		}
	}
	return holder, err
}
