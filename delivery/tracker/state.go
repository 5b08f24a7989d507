package tracker

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/delivery/keyspace"
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

// stateScript reads a PR's tracker, its reviews and the results at its
// head in one round trip (the checks key needs the head the first read
// finds). The keys share the repository's hash tag.
// Its KEYS, ARGV and reply are in state.lua.
//
//go:embed state.lua
var stateLua string

var stateScript = keyspace.NewScript("delivery/tracker/state.lua", stateLua)

// State reads what the tracker knows of PR number of repo: for tests and
// the health sweep.
func (t *Tracker) State(ctx context.Context, repo string, number int) (PRState, error) {
	tag := t.j.Tag(t.shardOf(repo))
	s := PRState{Repo: repo, Number: number, Checks: map[string]CheckResult{}, Reviews: map[string]string{}}
	res, err := stateScript.Run(ctx, t.rdb, []string{prKey(tag, repo, number), reviewsKey(tag, repo, number)},
		checksKey(tag, repo, "")).Slice()
	if err != nil {
		return s, fmt.Errorf("state of %s#%d: %w", repo, number, err)
	}
	if len(res) != 3 {
		return s, fmt.Errorf("state of %s#%d: %d replies, want 3", repo, number, len(res))
	}
	h := prFields(pairs(res[0]))
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
	for who, v := range pairs(res[1]) {
		state, _, _ := strings.Cut(v, " ")
		if state != "dismissed" {
			s.Reviews[who] = state
		}
	}
	for name, v := range pairs(res[2]) {
		r, at, _ := strings.Cut(v, " ")
		s.Checks[name] = CheckResult{Result: r, At: msTime(at)}
	}
	return s, nil
}

// prLong maps the tracker hash's short field names to the previous
// layout's (tracker.lua's PR_LONG); r and f are the current head's
// ready:<sha> and failed:<sha> (docs/design.md §3).
var prLong = map[string]string{"w": "ws", "s": "state", "d": "draft", "m": "merged", "h": "head",
	"hs": "head_seen_at", "b": "base", "a": "author", "t": "title", "l": "labels", "u": "updated_at"}

// prFields reads a PR tracker hash of either layout under the previous
// layout's names (a short name wins over its long one), with the current
// head's r and f as ready:<head> and failed:<head>.
func prFields(raw map[string]string) map[string]string {
	h := make(map[string]string, len(raw))
	for k, v := range raw {
		if _, ok := prLong[k]; !ok && k != "r" && k != "f" {
			h[k] = v
		}
	}
	for short, long := range prLong {
		if v, ok := raw[short]; ok {
			h[long] = v
		}
	}
	if head := h["head"]; head != "" {
		if v, ok := raw["r"]; ok {
			h["ready:"+head] = v
		}
		if v, ok := raw["f"]; ok {
			h["failed:"+head] = v
		}
	}
	return h
}

// pairs reads a flat HGETALL reply of a script into a map.
func pairs(v any) map[string]string {
	flat, _ := v.([]any)
	m := make(map[string]string, len(flat)/2)
	for i := 0; i+1 < len(flat); i += 2 {
		k, _ := flat[i].(string)
		m[k], _ = flat[i+1].(string)
	}
	return m
}

func msTime(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}
