package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/providers/event"
)

// claimInput is ARGV[5] of claim.lua.
type claimInput struct {
	scriptCtx
	Workspace    string `json:"workspace"`
	Repo         string `json:"repo"`
	Number       int    `json:"number"`
	Session      string `json:"session"`
	ServerSource string `json:"server_source"`
}

// Claim links PR number of repo to the session that opened it
// (session.pr_opened, docs/design.md §3). The first claim wins; the same session
// claiming again is a no-op. A claim by another session returns an error
// wrapping ErrLinkConflict and the holder ("" when it belongs to another
// workspace), and journals wakegate.link_conflict once per (PR, claimant).
// A link a Wakegate-Session trailer made is replaced by any session's
// claim (data.replaced names the session it had).
// When the tracker has already seen the PR, a new link journals
// github.pull_request.linked (id "pr/<n>/linked/<session>") so the
// author's chain hears of the PR once. repo is spelled as GitHub spells
// repository.full_name.
func (t *Tracker) Claim(ctx context.Context, workspace, repo string, number int, session string, now time.Time) (holder string, err error) {
	switch {
	case !event.ValidWorkspace(workspace):
		return "", fmt.Errorf("claim: workspace %q: %w", workspace, ErrInvalidFact)
	case !event.ValidID(session):
		return "", fmt.Errorf("claim: session %q: %w", session, ErrInvalidFact)
	case repo == "" || number <= 0:
		return "", fmt.Errorf("claim: pull request %s#%d: %w", repo, number, ErrInvalidFact)
	}
	in := claimInput{
		scriptCtx: t.scriptCtx(now), Workspace: workspace, Repo: repo, Number: number,
		Session: session, ServerSource: event.ServerSource(workspace),
	}
	in.Req = map[string][]string{}
	b, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("claim: encode input: %w", err)
	}
	res, err := t.run(ctx, claimScript, t.shardOf(repo), repo, nil, func(map[string][]string) ([]any, error) {
		return []any{string(b)}, nil
	})
	if err != nil {
		return "", fmt.Errorf("claim %s#%d for %s: %w", repo, number, session, err)
	}
	if status, _ := res[0].(string); status == "conflict" {
		holder, _ = res[1].(string)
		return holder, fmt.Errorf("claim %s#%d for %s: %w", repo, number, session, ErrLinkConflict)
	}
	return session, nil
}

// Link returns the session that claimed PR number of repo from
// workspace, or "" when none did. A link by a Wakegate-Session trailer is
// no claim (a claim replaces it): "".
func (t *Tracker) Link(ctx context.Context, workspace, repo string, number int) (string, error) {
	tag := t.j.Tag(t.shardOf(repo))
	v, err := t.rdb.HMGet(ctx, prKey(tag, repo, number), "session", "session_ws", "session_via").Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return "", fmt.Errorf("link of %s#%d: %w", repo, number, err)
	}
	session, _ := v[0].(string)
	ws, _ := v[1].(string)
	via, _ := v[2].(string)
	if ws != workspace || via == "trailer" {
		return "", nil
	}
	return session, nil
}
