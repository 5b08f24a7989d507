package app

import (
	"encoding/json"
	"fmt"

	gh "github.com/google/go-github/v66/github"

	"github.com/wakegate/wakegate/providers/event"
	wgh "github.com/wakegate/wakegate/providers/github"
)

// ClosedFact is the fact a pull_request.closed webhook about pr would have
// given: pr, as the REST API returns it, is wrapped in the webhook's
// envelope and normalized by the webhook path's own Normalize, so the
// event has the same id (github.pull_request.closed from subject and
// closed_at: "pr/<n>/closed/<closed_at>"), source, subject, summary and
// data, and a webhook that arrives later journals nothing new.
//
// repo is the watched "org/repo"; the repository's full name GitHub gives
// in the PR's base wins, as a webhook's repository.full_name would, so
// the subject and source match in case too.
func ClosedFact(pr *gh.PullRequest, repo string) (*wgh.Fact, error) {
	if pr == nil || pr.GetState() != "closed" || pr.ClosedAt == nil {
		return nil, fmt.Errorf("pull request #%d of %s is not closed", pr.GetNumber(), repo)
	}
	if full := pr.GetBase().GetRepo().GetFullName(); full != "" {
		repo = full
	}
	p := *pr
	// The list endpoint's "simple" pull requests carry merged_at, not
	// merged; a webhook's always carry merged.
	merged := pr.GetMerged() || pr.MergedAt != nil
	p.Merged = &merged
	var env struct {
		Action      string          `json:"action"`
		Number      int             `json:"number"`
		PullRequest *gh.PullRequest `json:"pull_request"`
		Repository  struct {
			FullName string `json:"full_name"`
		} `json:"repository"`
	}
	env.Action, env.Number, env.PullRequest = "closed", pr.GetNumber(), &p
	env.Repository.FullName = repo
	body, err := json.Marshal(&env)
	if err != nil {
		return nil, fmt.Errorf("encode pull request #%d of %s: %w", pr.GetNumber(), repo, err)
	}
	f, err := wgh.Normalize("pull_request", body)
	if err != nil {
		return nil, fmt.Errorf("pull request #%d of %s: %w", pr.GetNumber(), repo, err)
	}
	if f.Type != event.TypeGitHubPullRequestClosed || !f.Terminal || f.ID == "" {
		return nil, fmt.Errorf("pull request #%d of %s normalized to %q, not a closed event", pr.GetNumber(), repo, f.Type)
	}
	return &f, nil
}
