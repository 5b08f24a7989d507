package tracker

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// PRState is what the tracker knows of one pull request.
type PRState struct {
	Repo      string
	Number    int
	Workspace string // of the deliveries that built it
	// Seen reports whether a pull_request snapshot has been applied; the
	// fields below up to Labels are zero until then.
	Seen          bool
	State         string // open | closed
	Draft, Merged bool
	Head, Base    string
	Author, Title string
	Labels        []string
	HeadSeenAt    time.Time // when the current head first appeared
	UpdatedAt     time.Time // updated_at of the newest snapshot applied
	// Session is the linked session, and SessionWorkspace the workspace
	// that claimed it; "" when not linked.
	Session, SessionWorkspace string
	Ready                     []string               // head shas github.pull_request.ready was emitted for
	Failed                    []string               // head shas checks_failed was emitted for
	Checks                    map[string]CheckResult // the latest result per check name at Head
	Reviews                   map[string]string      // reviewer → standing review: approved | changes_requested (dismissed ones are left out)
}

// CheckResult is the latest result of one check name at one sha.
type CheckResult struct {
	Result string // pass | fail | pending
	At     time.Time
}

// State reads what the tracker knows of PR number of repo: for tests and
// the health sweep.
func (t *Tracker) State(ctx context.Context, repo string, number int) (PRState, error) {
	tag := t.j.Tag(t.shardOf(repo))
	s := PRState{Repo: repo, Number: number, Checks: map[string]CheckResult{}, Reviews: map[string]string{}}
	h, err := t.rdb.HGetAll(ctx, prKey(tag, repo, number)).Result()
	if err != nil {
		return s, fmt.Errorf("state of %s#%d: %w", repo, number, err)
	}
	_, s.Seen = h["state"]
	s.Workspace, s.State, s.Head, s.Base = h["ws"], h["state"], h["head"], h["base"]
	s.Author, s.Title = h["author"], h["title"]
	s.Draft, s.Merged = h["draft"] == "1", h["merged"] == "1"
	s.Session, s.SessionWorkspace = h["session"], h["session_ws"]
	s.HeadSeenAt, s.UpdatedAt = msTime(h["head_seen_at"]), msTime(h["updated_at"])
	if l := h["labels"]; l != "" {
		_ = json.Unmarshal([]byte(l), &s.Labels)
	}
	for k := range h {
		if sha, ok := strings.CutPrefix(k, "ready:"); ok {
			s.Ready = append(s.Ready, sha)
		}
		if sha, ok := strings.CutPrefix(k, "failed:"); ok {
			s.Failed = append(s.Failed, sha)
		}
	}
	sort.Strings(s.Ready)
	sort.Strings(s.Failed)
	reviews, err := t.rdb.HGetAll(ctx, reviewsKey(tag, repo, number)).Result()
	if err != nil {
		return s, fmt.Errorf("reviews of %s#%d: %w", repo, number, err)
	}
	for who, v := range reviews {
		state, _, _ := strings.Cut(v, " ")
		if state != "dismissed" {
			s.Reviews[who] = state
		}
	}
	if s.Head != "" {
		checks, err := t.rdb.HGetAll(ctx, checksKey(tag, repo, s.Head)).Result()
		if err != nil {
			return s, fmt.Errorf("checks of %s@%s: %w", repo, s.Head, err)
		}
		for name, v := range checks {
			r, at, _ := strings.Cut(v, " ")
			s.Checks[name] = CheckResult{Result: r, At: msTime(at)}
		}
	}
	return s, nil
}

func msTime(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
