package health

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/providers/event"
)

// isPR reports whether subject names a pull request: github:<org>/<repo>#<n>.
func isPR(subject string) bool {
	_, _, ok := parsePR(subject)
	return ok
}

func parsePR(subject string) (repo string, number int, ok bool) {
	rest, ok := strings.CutPrefix(subject, "github:")
	if !ok {
		return "", 0, false
	}
	repo, num, ok := strings.Cut(rest, "#")
	if !ok || repo == "" || !strings.Contains(repo, "/") {
		return "", 0, false
	}
	n, err := strconv.Atoi(num)
	if err != nil || n <= 0 {
		return "", 0, false
	}
	return repo, n, true
}

// pullRequest evaluates one pull request: whether it is stuck (open, not
// a draft, the same head and no new check result for StuckAfter:
// github.pull_request.stuck is synthesized once per head), and, once it
// has ended, I6 on its subject.
func (r *run) pullRequest(ctx context.Context, subj string) (time.Time, error) {
	repo, n, _ := parsePR(subj)
	next := soonest{now: r.now}
	st, err := r.s.prs.State(ctx, repo, n)
	if err != nil {
		return time.Time{}, err
	}
	if st.Seen && st.State == "open" && !st.Draft && st.Head != "" {
		last := st.HeadSeenAt
		for _, c := range st.Checks { // results at head only
			if c.At.After(last) {
				last = c.At
			}
		}
		if !last.IsZero() {
			at := last.Add(r.s.cfg.StuckAfter)
			switch {
			case r.now.Before(at):
				next.add(at)
			case r.repair:
				if err := r.stuck(ctx, subj, repo, n, st.Head, st.Title, st.Session, st.SessionWorkspace, last); err != nil {
					return time.Time{}, err
				}
			}
		}
	}
	ended, err := r.isEnded(ctx, subj)
	if err != nil {
		return time.Time{}, err
	}
	if ended {
		if r.repair {
			r.pipe.HDel(ctx, r.s.emittedKey(r.ws), subj)
			r.pipe.ZRem(ctx, r.s.prsKey(r.ws), subj)
		}
		if err := r.watches(ctx, subj, &next); err != nil {
			return time.Time{}, err
		}
	} else {
		r.setFinding(ctx, "I6", subj, 0, nil)
	}
	return next.at, nil
}

// stuck journals github.pull_request.stuck once per head: its fact id is
// stuck/<subject>/<head sha>. It carries the linked session, so the
// author's supervision chain hears of it.
func (r *run) stuck(ctx context.Context, subj, repo string, n int, head, title, session, sessionWS string, last time.Time) error {
	factID := "stuck/" + subj + "/" + head
	if done, err := r.emitted(ctx, subj, factID); err != nil || done {
		return err
	}
	data, _ := json.Marshal(map[string]any{"repo": repo, "number": n, "head": head, "title": title,
		"url": fmt.Sprintf("https://github.com/%s/pull/%d", repo, n), "last_result": last, "stuck_after": r.s.cfg.StuckAfter.String()})
	short := head
	if len(short) > 7 {
		short = short[:7]
	}
	e := &event.Event{SpecVersion: event.SpecVersion, ID: factID, Source: event.GitHubSource(repo),
		Type: event.TypeGitHubPullRequestStuck, Subject: subj, Time: r.now.UTC(), DataContentType: "application/json",
		Workspace: r.ws, Priority: event.DefaultPriority(event.TypeGitHubPullRequestStuck, data),
		Summary: fmt.Sprintf("%s#%d has had no new result at %s for %s", repo, n, short, r.now.Sub(last).Truncate(time.Second)),
		Data:    data}
	if session != "" && sessionWS == r.ws && event.ValidID(session) {
		e.SessionID = session
		rec, err := r.s.reg.Get(ctx, r.ws, event.SessionSubject(session), r.now)
		if err != nil {
			return err
		}
		e.Lineage = rec.Lineage
	}
	return r.synthesize(ctx, e)
}

// isEnded reports whether a subject has ended and stays ended: it has a
// terminal record, and its current state agrees — a pull request is not
// open again, a session has not resumed. Read once per pass.
func (r *run) isEnded(ctx context.Context, subj string) (bool, error) {
	if v, ok := r.ended[subj]; ok {
		return v, nil
	}
	t, err := r.s.j.TerminalOf(ctx, r.ws, subj)
	if err != nil {
		return false, err
	}
	ended := t != nil
	if ended {
		switch {
		case strings.HasPrefix(subj, "session:"):
			rec, err := r.s.reg.Get(ctx, r.ws, subj, r.now)
			if err != nil {
				return false, err
			}
			ended = rec.Exited
		case isPR(subj):
			repo, n, _ := parsePR(subj)
			st, err := r.s.prs.State(ctx, repo, n)
			if err != nil {
				return false, err
			}
			ended = st.State != "open"
		}
	}
	r.ended[subj] = ended
	return ended, nil
}

// watchRef is a stale subscription in an I6 example.
type watchRef struct {
	ID       string    `json:"id"`
	Owner    string    `json:"owner"`
	Until    string    `json:"until,omitempty"`
	Subjects []string  `json:"subjects"`
	Created  time.Time `json:"created_at"`
}

type i6Example struct {
	Subject       string     `json:"subject"`
	Ended         string     `json:"ended"` // the terminal event's type
	EndedAt       string     `json:"ended_at"`
	Subscriptions []watchRef `json:"subscriptions"`
}

// watches is I6 on a subject that has ended: the subscriptions on it that
// can never match again — "until subject_terminal" ones (past watchGrace:
// the router closes those as it routes the terminal event), and any whose
// every subject has ended (as a new subscription on ended subjects is
// closed at once, docs/design.md §3). The periodic pass closes them.
func (r *run) watches(ctx context.Context, subj string, next *soonest) error {
	t, err := r.s.j.TerminalOf(ctx, r.ws, subj)
	if err != nil || t == nil {
		r.setFinding(ctx, "I6", subj, 0, nil)
		return err
	}
	endedAt, _ := time.Parse(time.RFC3339Nano, t.Time)
	subs, err := r.s.subs.OnSubject(ctx, r.ws, subj)
	if err != nil {
		return err
	}
	var stale []subscriptions.Subscription
	for _, sub := range subs {
		all, err := r.allEnded(ctx, sub)
		if err != nil {
			return err
		}
		if sub.Until != subscriptions.UntilSubjectTerminal && !all {
			continue
		}
		if sub.Until == subscriptions.UntilSubjectTerminal && !endedAt.IsZero() && r.now.Before(endedAt.Add(watchGrace)) {
			next.add(endedAt.Add(watchGrace))
			continue
		}
		stale = append(stale, sub)
	}
	if len(stale) > 0 && r.repair {
		ids := make([]string, len(stale))
		for i, sub := range stale {
			ids[i] = sub.ID
		}
		closed, err := r.s.subs.Close(ctx, r.ws, ids)
		if err != nil {
			return err
		}
		for _, sub := range closed {
			r.repaired(ctx, "I6", "closed "+sub.ID+" on "+subj)
			r.s.log.Info("closed a watch on an ended subject", "workspace", r.ws, "subscription", sub.ID,
				"owner", sub.Owner, "subject", subj, "ended", t.Type)
		}
		stale = nil
	}
	if len(stale) == 0 {
		r.setFinding(ctx, "I6", subj, 0, nil)
		return nil
	}
	ex := i6Example{Subject: subj, Ended: t.Type, EndedAt: t.Time}
	for _, sub := range stale {
		ex.Subscriptions = append(ex.Subscriptions, watchRef{ID: sub.ID, Owner: sub.Owner, Until: sub.Until,
			Subjects: sub.Subjects, Created: sub.CreatedAt})
	}
	r.setFinding(ctx, "I6", subj, int64(len(stale)), ex)
	return nil
}

// allEnded reports whether every subject of sub has ended.
func (r *run) allEnded(ctx context.Context, sub subscriptions.Subscription) (bool, error) {
	for _, other := range sub.Subjects {
		if strings.HasSuffix(other, "*") {
			return false, nil
		}
		ended, err := r.isEnded(ctx, other)
		if err != nil || !ended {
			return false, err
		}
	}
	return len(sub.Subjects) > 0, nil
}
