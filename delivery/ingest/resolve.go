package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/providers/kind"
)

// Lineages resolves a new child's lineage from its parent, refusing a
// cycle with sessions.ErrCycle (package sessions).
type Lineages interface {
	LineageFor(ctx context.Context, workspace, child, parent string, now time.Time) ([]string, error)
}

// Linker links a PR to the session that opened it (package tracker):
// Link reads its holder, Claim takes it, failing with
// tracker.ErrLinkConflict when another session holds it.
type Linker interface {
	Link(ctx context.Context, workspace, repo string, number int) (string, error)
	Claim(ctx context.Context, workspace, repo string, number int, session string, now time.Time) (string, error)
}

// ErrRepoElsewhere is wrapped by the error of a session.pr_opened about
// a repository that does not map to the pushing token's workspace.
var ErrRepoElsewhere = kind.New(kind.Forbidden, "does not map to this workspace")

// LinkedError refuses a session.pr_opened about a pull request another
// session holds; it is of kind conflict (tracker.ErrLinkConflict).
type LinkedError struct {
	Repo   string
	Number int
	// Holder is the session that holds the PR, when it is of the same
	// workspace; "" otherwise.
	Holder string
}

func (e *LinkedError) Error() string {
	return fmt.Sprintf("%s#%d is linked to another session", e.Repo, e.Number)
}

func (e *LinkedError) Unwrap() error { return tracker.ErrLinkConflict }

// StepError is a storage failure of one step of Resolve: Step is
// "lineage", "pull request link" or "pull request claim"; Err is the
// store's error, kind and all.
type StepError struct {
	Step string
	Err  error
}

func (e *StepError) Error() string { return e.Step + ": " + e.Err.Error() }

func (e *StepError) Unwrap() error { return e.Err }

// Resolver does what must happen before an agent push's commit
// (docs/design.md §4), checking everything before writing anything: the
// lineage of new parents (refusing cycles), the repositories of PR
// claims, existing links (refusing a second claimant), and only then the
// claims. A claim is idempotent and written before the events are: a push
// retried after a failed commit claims again harmlessly.
type Resolver struct {
	lineages   Lineages
	linker     Linker
	workspaces *github.RepoMap[string]
}

// NewResolver returns the resolver of pushes over the session registry,
// the PR links and the repository → workspace map.
func NewResolver(lineages Lineages, linker Linker, workspaces *github.RepoMap[string]) *Resolver {
	return &Resolver{lineages: lineages, linker: linker, workspaces: workspaces}
}

// Resolve returns the items to commit of the events prepared for one push
// to workspace. refused lists the events refused for what they ask
// (a parent that would make a cycle), every one of them; then nothing
// was claimed. err is the first refusal of the whole push — a repository
// elsewhere (ErrRepoElsewhere, kind forbidden), a PR linked to another
// session (*LinkedError, kind conflict) — or a storage failure, a
// *StepError.
func (r *Resolver) Resolve(ctx context.Context, workspace string, prepared []*agent.Prepared, now time.Time) (items []Item, refused []*agent.EventError, err error) {
	items = make([]Item, len(prepared))
	for i, p := range prepared {
		e := p.Event
		items[i] = Item{Event: e, Labels: p.Labels, PausedUntil: p.PausedUntil, Reason: p.Reason,
			Journal: e.Type != event.TypeSessionHeartbeat}
		if p.Parent != "" {
			lineage, err := r.lineages.LineageFor(ctx, e.Workspace, e.SessionID, p.Parent, now)
			if errors.Is(err, sessions.ErrCycle) {
				refused = append(refused, &agent.EventError{Index: i, ID: e.ID, Detail: err.Error()})
				continue
			}
			if err != nil {
				return nil, nil, &StepError{Step: "lineage", Err: err}
			}
			items[i].Parent, items[i].Lineage = p.Parent, lineage
		}
		if c := p.PROpened; c != nil {
			if ws, ok := r.workspaces.Lookup(c.Repo); !ok || ws != workspace {
				return nil, nil, fmt.Errorf("event %d: repository %s %w", i, c.Repo, ErrRepoElsewhere)
			}
			holder, err := r.linker.Link(ctx, workspace, c.Repo, c.Number)
			if err != nil {
				return nil, nil, &StepError{Step: "pull request link", Err: err}
			}
			if holder != "" && holder != e.SessionID {
				// Claiming again writes only the wakegate.link_conflict record.
				if _, err := r.linker.Claim(ctx, workspace, c.Repo, c.Number, e.SessionID, now); !errors.Is(err, tracker.ErrLinkConflict) {
					if err == nil {
						err = errors.New("claim of a linked pull request succeeded")
					}
					return nil, nil, &StepError{Step: "pull request claim", Err: err}
				}
				return nil, nil, &LinkedError{Repo: c.Repo, Number: c.Number, Holder: holder}
			}
		}
	}
	if len(refused) > 0 {
		return nil, refused, nil
	}
	for _, p := range prepared {
		if c := p.PROpened; c != nil {
			holder, err := r.linker.Claim(ctx, workspace, c.Repo, c.Number, p.Event.SessionID, now)
			if errors.Is(err, tracker.ErrLinkConflict) { // claimed meanwhile
				return nil, nil, &LinkedError{Repo: c.Repo, Number: c.Number, Holder: holder}
			}
			if err != nil {
				return nil, nil, &StepError{Step: "pull request claim", Err: err}
			}
		}
	}
	return items, nil, nil
}
