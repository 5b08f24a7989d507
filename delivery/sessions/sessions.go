// Package sessions is the registry of parties (docs/design.md §2): for each
// session its parent and lineage, labels, lifecycle and busy state, pause,
// and when it was last seen; for every party, liveness.
//
// A party's record lives under the hash tag of the journal shard its
// events go to, so the commit script that journals a session's own event
// updates its record in the same atomic step (see package ingest).
package sessions

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/kind"
)

// MaxDepth caps lineage: ancestors beyond it are not recorded.
const MaxDepth = 32

// Liveness of a party.
type Liveness string

// Liveness values (docs/design.md §2).
const (
	Unknown Liveness = "unknown" // never seen: a valid recipient and lease holder
	Live    Liveness = "live"
	Dead    Liveness = "dead" // exited, or seen then silent past the TTL
)

// Session is a party's record.
type Session struct {
	Workspace   string    `json:"workspace"`
	Party       string    `json:"party"`
	Parent      string    `json:"parent,omitempty"`
	Lineage     []string  `json:"lineage,omitempty"`
	Labels      []string  `json:"labels,omitempty"`
	State       string    `json:"state,omitempty"` // the last lifecycle type, e.g. session.turn_ended
	Busy        string    `json:"busy"`            // busy | idle | unknown
	Exited      bool      `json:"exited"`
	SeenAt      time.Time `json:"seen_at,omitzero"`
	BusyAt      time.Time `json:"busy_at,omitzero"`
	PausedUntil time.Time `json:"paused_until,omitzero"`
	PauseReason string    `json:"pause_reason,omitempty"`
	Liveness    Liveness  `json:"liveness"`
}

// Registry reads and records parties.
type Registry struct {
	rdb redis.UniversalClient
	j   *journal.Journal
	ttl time.Duration

	mu   sync.Mutex
	seen map[string]time.Time // party key → last time this process recorded a sighting
}

// New returns a registry; ttl is WAKEGATE_SESSION_TTL (default 10m).
func New(rdb redis.UniversalClient, j *journal.Journal, ttl time.Duration) *Registry {
	if ttl <= 0 {
		ttl = 10 * time.Minute
	}
	return &Registry{rdb: rdb, j: j, ttl: ttl, seen: map[string]time.Time{}}
}

// Key is the hash holding a party's record, under the tag of the journal
// shard of the party's own subject.
func Key(j *journal.Journal, workspace, party string) string {
	return j.Keys(j.ShardOf(workspace, party)).Party(workspace, party)
}

// Get returns the record of a party; a party never recorded comes back
// with Liveness Unknown.
func (r *Registry) Get(ctx context.Context, workspace, party string, now time.Time) (*Session, error) {
	return r.read(workspace, party, r.rdb.HGetAll(ctx, Key(r.j, workspace, party)))(now)
}

// Queue queues the read of a party's record on p (a pipeline, so that a
// caller reads several things in one round trip); the func it returns
// answers as Get once p has run.
func (r *Registry) Queue(ctx context.Context, p redis.Pipeliner, workspace, party string) func(now time.Time) (*Session, error) {
	return r.read(workspace, party, p.HGetAll(ctx, Key(r.j, workspace, party)))
}

func (r *Registry) read(workspace, party string, cmd *redis.MapStringStringCmd) func(now time.Time) (*Session, error) {
	return func(now time.Time) (*Session, error) {
		h, err := cmd.Result()
		if err != nil {
			return nil, fmt.Errorf("session %s: %w", party, err)
		}
		return decode(workspace, party, h, r.ttl, now), nil
	}
}

func decode(workspace, party string, h map[string]string, ttl time.Duration, now time.Time) *Session {
	s := &Session{Workspace: workspace, Party: party, Busy: "unknown", Parent: h["parent"], State: h["state"], PauseReason: h["pause_reason"]}
	if h["lineage"] != "" {
		_ = json.Unmarshal([]byte(h["lineage"]), &s.Lineage) // written by us; a bad value reads as none
	}
	if h["labels"] != "" {
		_ = json.Unmarshal([]byte(h["labels"]), &s.Labels)
	}
	s.Exited = h["exited"] == "1"
	s.SeenAt = ms(h["seen_at"])
	s.BusyAt = ms(h["busy_at"])
	s.PausedUntil = ms(h["paused_until"])
	if b := h["busy"]; b == "busy" || b == "idle" {
		s.Busy = b
	}
	switch {
	case s.Exited:
		s.Liveness = Dead
	case s.SeenAt.IsZero():
		s.Liveness = Unknown
	case now.Sub(s.SeenAt) > ttl:
		s.Liveness = Dead
	default:
		s.Liveness = Live
	}
	return s
}

func ms(v string) time.Time {
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(n).UTC()
}

// Known reports whether the registry has a record of session id: it
// pushed, made a request, or was minted a token or a parent.
func (r *Registry) Known(ctx context.Context, workspace, id string) (bool, error) {
	n, err := r.rdb.Exists(ctx, Key(r.j, workspace, event.SessionSubject(id))).Result()
	if err != nil {
		return false, fmt.Errorf("session %s: %w", id, err)
	}
	return n == 1, nil
}

// LineageFor computes the lineage a child gets under parent, and refuses a
// parent that would make a cycle.
func (r *Registry) LineageFor(ctx context.Context, workspace, child, parent string, now time.Time) ([]string, error) {
	if parent == child {
		return nil, fmt.Errorf("session %s cannot be its own parent: %w", child, ErrCycle)
	}
	p, err := r.Get(ctx, workspace, event.SessionSubject(parent), now)
	if err != nil {
		return nil, err
	}
	lineage := append([]string{parent}, p.Lineage...)
	for _, a := range lineage {
		if a == child {
			return nil, fmt.Errorf("parent %s descends from %s: %w", parent, child, ErrCycle)
		}
	}
	if len(lineage) > MaxDepth {
		lineage = lineage[:MaxDepth]
	}
	return lineage, nil
}

// ErrCycle is returned for a parent that would make the lineage a cycle.
var ErrCycle = kind.New(kind.Unprocessable, "parent would make a cycle")

// Seen records that a party made an authenticated request. Sightings are
// written at most once a second per party per process: liveness is
// measured in minutes.
func (r *Registry) Seen(ctx context.Context, workspace, party string, now time.Time) error {
	k := Key(r.j, workspace, party)
	r.mu.Lock()
	last, ok := r.seen[k]
	fresh := !ok || now.Sub(last) >= time.Second
	if fresh {
		if len(r.seen) > 100_000 {
			clear(r.seen)
		}
		r.seen[k] = now
	}
	r.mu.Unlock()
	if !fresh {
		return nil
	}
	if err := r.rdb.HSet(ctx, k, "seen_at", now.UnixMilli()).Err(); err != nil {
		return fmt.Errorf("record sighting of %s: %w", party, err)
	}
	return nil
}

// RegistryLua defines wg_session (registry.lua), included by the agent
// commit script: it applies one session event to a session's record.
//
//go:embed registry.lua
var RegistryLua string

// setParentScript records a parent once.
// Its KEYS, ARGV and reply are in set_parent.lua.
//
//go:embed set_parent.lua
var setParentLua string

var setParentScript = keyspace.NewScript("delivery/sessions/set_parent.lua", setParentLua)

// SetParent records parent as child's parent unless it has one already.
func (r *Registry) SetParent(ctx context.Context, workspace, child, parent string, now time.Time) error {
	lineage, err := r.LineageFor(ctx, workspace, child, parent, now)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(lineage)
	if err := setParentScript.Run(ctx, r.rdb, []string{Key(r.j, workspace, event.SessionSubject(child))}, parent, string(b)).Err(); err != nil {
		return fmt.Errorf("record parent of %s: %w", child, err)
	}
	return nil
}

// Mint outcomes (docs/design.md §4, the child-token route).
var (
	// ErrNotInSubtree: the session exists and the caller is not its
	// parent, its minter, or one of its ancestors.
	ErrNotInSubtree = kind.New(kind.Forbidden, "the session exists and is not in the caller's subtree")
)

// MintResult says what Mint found or did.
type MintResult struct {
	Created bool   // the session did not exist; it is now the caller's child
	Parent  string // the session's recorded parent ("" for none)
	Minter  string // the party recorded as having minted it first ("" for none)
}

// mintScript creates a session's record for a child token, unless the
// session exists.
// Its KEYS, ARGV and reply are in mint.lua.
//
//go:embed mint.lua
var mintLua string

var mintScript = keyspace.NewScript("delivery/sessions/mint.lua", mintLua)

// Mint decides whether caller may have a token for session child of
// workspace (docs/design.md §4): a child that does not exist yet is
// created as the caller's child (a session caller is its parent; any
// caller is recorded as its minter); one that exists is re-issued only
// within the caller's own subtree — the caller is the child itself, its
// recorded parent or minter, an ancestor, or the minter of an ancestor.
// Otherwise ErrNotInSubtree. It never rewrites a parent.
func (r *Registry) Mint(ctx context.Context, workspace, child string, caller event.Party, now time.Time) (MintResult, error) {
	key := Key(r.j, workspace, event.SessionSubject(child))
	parent := caller.Session()
	if parent == child {
		return MintResult{}, nil // a session re-issuing for itself
	}
	var lineage []byte
	if parent != "" {
		l, err := r.LineageFor(ctx, workspace, child, parent, now)
		if err != nil && !errors.Is(err, ErrCycle) {
			return MintResult{}, err
		}
		if err == nil {
			lineage, _ = json.Marshal(l)
		} else {
			parent = "" // the caller descends from child: not creatable, maybe an ancestor's call below
		}
	}
	if parent != "" || caller.Session() == "" {
		created, err := mintScript.Run(ctx, r.rdb, []string{key}, parent, string(lineage), string(caller), now.UnixMilli()).Int()
		if err != nil {
			return MintResult{}, fmt.Errorf("mint for %s: %w", child, err)
		}
		if created == 1 {
			return MintResult{Created: true, Parent: parent, Minter: string(caller)}, nil
		}
	}
	h, err := r.rdb.HGetAll(ctx, key).Result()
	if err != nil {
		return MintResult{}, fmt.Errorf("session %s: %w", child, err)
	}
	if len(h) == 0 { // a caller that descends from a child with no record: nothing to re-issue
		return MintResult{}, ErrNotInSubtree
	}
	s := decode(workspace, event.SessionSubject(child), h, r.ttl, now)
	res := MintResult{Parent: s.Parent, Minter: h["minter"]}
	if res.Minter == string(caller) || (caller.Session() != "" && slices.Contains(append([]string{s.Parent}, s.Lineage...), caller.Session())) {
		return res, nil
	}
	if caller.Session() == "" && len(s.Lineage) > 0 {
		// A caller that is not a session is no ancestor; it holds the
		// subtree of each session it minted.
		pipe := r.rdb.Pipeline()
		cmds := make([]*redis.StringCmd, len(s.Lineage))
		for i, a := range s.Lineage {
			cmds[i] = pipe.HGet(ctx, Key(r.j, workspace, event.SessionSubject(a)), "minter")
		}
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return MintResult{}, fmt.Errorf("minters of %s's ancestors: %w", child, err)
		}
		for _, c := range cmds {
			if c.Val() == string(caller) {
				return res, nil
			}
		}
	}
	return MintResult{}, ErrNotInSubtree
}
