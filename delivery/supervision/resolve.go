package supervision

import (
	"context"
	"fmt"
	"slices"

	"github.com/wakegate/wakegate/providers/event"
)

// How an effective controller was found (Resolution.Resolved); an
// inherited one is "ancestor:<id>".
const (
	ResolvedOwn     = "own"
	ResolvedDefault = "workspace_default"
	ResolvedNone    = "none"
)

// Resolution is a session's effective controller and how it was found.
type Resolution struct {
	Party    string `json:"party"`    // "" when nobody controls the session
	Resolved string `json:"resolved"` // own | ancestor:<id> | workspace_default | none
}

// Applicable returns the edges that apply to chain[0], in the order they
// are considered: its own edges, then each ancestor's subtree edges,
// nearest first. chain is a session followed by its lineage (nearest
// ancestor first) and edges what EdgesFor returned for it; Edge.Session
// names whose edge each one is. Inheritance is resolved here, from the
// lineage, so an edge added later covers sessions that already exist.
func Applicable(chain []string, edges map[string][]Edge) []Edge {
	var out []Edge
	for i, s := range chain {
		for _, e := range edges[s] {
			if i == 0 || e.Scope == ScopeSubtree {
				out = append(out, e)
			}
		}
	}
	return out
}

// EffectiveController resolves who controls chain[0] (docs/design.md §5): its own
// controller if not dead, else the nearest ancestor's subtree controller
// that is not dead (a dead holder: keep climbing), else the workspace's
// default controller if not dead, else none. dead is asked about each
// candidate in that order until one is not dead. The router and the
// gateway's GET …/supervision both resolve through here.
func EffectiveController(ctx context.Context, workspace string, chain []string, edges map[string][]Edge, defaultController string, dead DeadFunc) (Resolution, error) {
	for _, e := range Applicable(chain, edges) {
		if e.Role != Controller {
			continue
		}
		d, err := dead(ctx, workspace, e.Holder)
		if err != nil {
			return Resolution{}, fmt.Errorf("liveness of %s: %w", e.Holder, err)
		}
		if d {
			continue
		}
		how := ResolvedOwn
		if e.Session != chain[0] {
			how = "ancestor:" + e.Session
		}
		return Resolution{Party: e.Holder, Resolved: how}, nil
	}
	if defaultController != "" {
		d, err := dead(ctx, workspace, defaultController)
		if err != nil {
			return Resolution{}, fmt.Errorf("liveness of %s: %w", defaultController, err)
		}
		if !d {
			return Resolution{Party: defaultController, Resolved: ResolvedDefault}, nil
		}
	}
	return Resolution{Resolved: ResolvedNone}, nil
}

// HeldBy returns the controller leases party holds in workspace, by
// session id, each with its epoch. It reads the party's T:held set (which
// the lease scripts maintain) and checks every member against the lease
// itself, so a member that is no longer the party's is left out.
func (s *Store) HeldBy(ctx context.Context, workspace, party string) ([]Edge, error) {
	if !partyOK(party) {
		return nil, invalid("party %q", party)
	}
	if !event.ValidWorkspace(workspace) {
		return nil, invalid("workspace %q", workspace)
	}
	ids, err := s.rdb.SMembers(ctx, s.heldKey(workspace, party)).Result()
	if err != nil {
		return nil, storage("leases of "+party, err)
	}
	slices.Sort(ids)
	out := []Edge{}
	for len(ids) > 0 {
		n := min(len(ids), MaxSessions)
		edges, err := s.EdgesFor(ctx, workspace, ids[:n])
		if err != nil {
			return nil, err
		}
		for _, id := range ids[:n] {
			if es := edges[id]; len(es) > 0 && es[0].Role == Controller && es[0].Holder == party {
				out = append(out, es[0])
			}
		}
		ids = ids[n:]
	}
	return out, nil
}
