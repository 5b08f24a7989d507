// Package supervision keeps who supervises which session (docs/design.md §6):
// controller leases with fencing epochs, observer edges, the spawner as the
// default controller, and a workspace's supervision settings.
//
// A session has at most one controller, holding a lease: it is granted
// when free or when its holder is dead, moved by a takeover (which the
// caller must be allowed to make), and every new holder gets the next
// epoch, so a stale holder can be told apart. Observers are any number of
// parties with no lease. Each edge has a scope: self (this session) or
// subtree (it and every descendant, by lineage, resolved when an event is
// routed).
//
// # Storage
//
// Every key of a workspace is under one hash tag, so one script reads the
// edges of a session and all its ancestors (T = <prefix>:{sup:<workspace>}):
//
//	T:ctl:<session>  hash    holder, scope, epoch (epoch outlives a release,
//	                         so epochs only grow)
//	T:obs:<session>  hash    observer party → scope
//	T:held:<party>   set     sessions whose controller lease the party holds
//	                         (maintained by the lease scripts; read by HeldBy)
//	T:watch:<party>  set     sessions the party observes (counted with
//	                         T:held against MaxEdgesPerParty)
//	T:settings       string  the settings fields an admin has set, as JSON
//	                         (defaults are not stored)
package supervision

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/kind"
)

// Roles.
const (
	Controller = "controller"
	Observer   = "observer"
)

// Scopes.
const (
	ScopeSelf    = "self"
	ScopeSubtree = "subtree"
)

// Errors. ErrHeld is wrapped by *HeldError, which names the holder.
var (
	ErrInvalid   = kind.New(kind.Invalid, "invalid supervision request")  // 400
	ErrHeld      = kind.New(kind.Conflict, "controller lease held")       // 409
	ErrForbidden = kind.New(kind.Forbidden, "takeover not allowed")       // 403
	ErrNotFound  = kind.New(kind.NotFound, "no such edge")                // 404
	ErrLimit     = kind.New(kind.Limit, "supervision edge limit reached") // 422
)

// MaxEdgesPerParty bounds the supervision edges one party takes through
// Supervise — controller leases it holds (its spawned children's
// included) and sessions it observes (docs/design.md §10).
const MaxEdgesPerParty = 10_000

// HeldError is the answer to a controller request on a lease held by a
// party that is not dead: the 409 problem carries Holder and Epoch.
type HeldError struct {
	Holder string
	Epoch  int64
}

// Error names the holder and its epoch.
func (e *HeldError) Error() string {
	return fmt.Sprintf("controller lease held by %s (epoch %d)", e.Holder, e.Epoch)
}

// Unwrap makes errors.Is(err, ErrHeld) true.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Edge is one supervision edge of a session.
type Edge struct {
	Session string `json:"session_id"`
	Role    string `json:"role"` // controller | observer
	Holder  string `json:"holder"`
	Scope   string `json:"scope"` // self | subtree
	Epoch   int64  `json:"epoch"` // the controller lease's fencing epoch; 0 for observers
}

// DeadFunc tells whether a party is dead (docs/design.md §2): exited, or seen and
// then silent past the session TTL. Unknown parties are not dead. The
// caller wraps delivery/sessions' Registry.Get.
type DeadFunc func(ctx context.Context, workspace, party string) (dead bool, err error)

// Store reads and writes supervision edges and settings.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	dead   DeadFunc
}

// New returns a store whose keys start with prefix. dead decides whether a
// lease holder may be replaced without a takeover; nil treats every party
// as not dead.
func New(rdb redis.UniversalClient, prefix string, dead DeadFunc) *Store {
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	if dead == nil {
		dead = func(context.Context, string, string) (bool, error) { return false, nil }
	}
	return &Store{rdb: rdb, prefix: prefix, dead: dead}
}

func (s *Store) tag(ws string) string             { return keyspace.Supervision(s.prefix, ws) }
func (s *Store) ctlKey(ws, session string) string { return s.tag(ws) + ":ctl:" + session }
func (s *Store) obsKey(ws, session string) string { return s.tag(ws) + ":obs:" + session }
func (s *Store) settingsKey(ws string) string     { return s.tag(ws) + ":settings" }
func (s *Store) heldKey(ws, party string) string  { return s.tag(ws) + ":held:" + party }
func (s *Store) watchKey(ws, party string) string { return s.tag(ws) + ":watch:" + party }

func validScope(scope string) bool { return scope == ScopeSelf || scope == ScopeSubtree }

func partyOK(p string) bool {
	_, err := event.ParseParty(p)
	return err == nil
}

func invalid(format string, a ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, a...)...)
}

func storage(what string, err error) error { return fmt.Errorf("%s: %w", what, err) }

func epochOf(v any) int64 {
	n, _ := strconv.ParseInt(fmt.Sprint(v), 10, 64)
	return n
}

func strOf(v any) string {
	s, _ := v.(string)
	return s
}

func checkIDs(ws, session string) error {
	if !event.ValidWorkspace(ws) {
		return invalid("workspace %q", ws)
	}
	if !event.ValidID(session) {
		return invalid("session id %q must match ^[A-Za-z0-9._-]{1,128}$", session)
	}
	return nil
}

// leaseScript grants, keeps or moves a controller lease.
// Its KEYS, ARGV and reply are in lease.lua.
//
//go:embed lease.lua
var leaseLua string

var leaseScript = keyspace.NewScript("delivery/supervision/lease.lua", leaseLua)

// observeScript records an observer edge.
// Its KEYS, ARGV and reply are in observe.lua.
//
//go:embed observe.lua
var observeLua string

var observeScript = keyspace.NewScript("delivery/supervision/observe.lua", observeLua)

// releaseScript lets the holder go of a lease.
// Its KEYS, ARGV and reply are in release.lua.
//
//go:embed release.lua
var releaseLua string

var releaseScript = keyspace.NewScript("delivery/supervision/release.lua", releaseLua)

// defaultScript makes a parent its child's controller unless one is set.
// Its KEYS, ARGV and reply are in default.lua.
//
//go:embed default.lua
var defaultLua string

var defaultScript = keyspace.NewScript("delivery/supervision/default.lua", defaultLua)

// Supervise makes caller a controller or observer of session (docs/design.md §6).
//
// Observer: any party, any number per session, no lease; asking again
// updates the scope. Controller: the lease is granted when free or when its
// holder is dead (epoch+1); the holder asking again keeps its epoch (its
// scope is updated); a holder that is not dead refuses with *HeldError
// (wraps ErrHeld) unless takeover is set, which is allowed only when
// mayTakeOver (the caller decides: an ancestor of the session, a human:
// caller, or admin), else ErrForbidden. A takeover moves the lease to
// caller at epoch+1 and returns the displaced holder as prev: the caller
// sends it the "you are no longer driving <session>" entry. prev is empty
// in every other case (a dead holder replaced is not told).
//
// scope defaults to subtree for a controller (as the spawner's edge) and
// self for an observer.
func (s *Store) Supervise(ctx context.Context, workspace, session, caller, role, scope string, takeover, mayTakeOver bool, now time.Time) (edge Edge, prev string, err error) {
	_ = now // liveness is decided by the DeadFunc, which reads its own clock
	if err := checkIDs(workspace, session); err != nil {
		return Edge{}, "", err
	}
	if !partyOK(caller) {
		return Edge{}, "", invalid("caller %q is not a party", caller)
	}
	if caller == event.SessionSubject(session) {
		return Edge{}, "", invalid("a session cannot supervise itself")
	}
	switch role {
	case Controller, Observer:
	default:
		return Edge{}, "", invalid("role %q must be controller or observer", role)
	}
	if scope == "" {
		scope = ScopeSelf
		if role == Controller {
			scope = ScopeSubtree
		}
	}
	if !validScope(scope) {
		return Edge{}, "", invalid("scope %q must be self or subtree", scope)
	}
	limitErr := fmt.Errorf("%w: a party holds at most %d supervision edges (leases and observed sessions); release one first", ErrLimit, MaxEdgesPerParty)
	if role == Observer {
		n, err := observeScript.Run(ctx, s.rdb, []string{s.obsKey(workspace, session), s.heldKey(workspace, caller), s.watchKey(workspace, caller)},
			caller, scope, session, MaxEdgesPerParty).Int()
		if err != nil {
			return Edge{}, "", storage("observe "+session, err)
		}
		if n == 0 {
			return Edge{}, "", limitErr
		}
		return Edge{Session: session, Role: Observer, Holder: caller, Scope: scope}, "", nil
	}

	replace, replaceEpoch := "", int64(0) // the holder to replace, found dead or taken over
	replaceDead := false
	for range 8 {
		keys := []string{s.ctlKey(workspace, session), s.heldKey(workspace, caller), s.heldKey(workspace, caller), s.watchKey(workspace, caller)}
		if replace != "" {
			keys[2] = s.heldKey(workspace, replace)
		}
		res, err := leaseScript.Run(ctx, s.rdb, keys, caller, scope, replace, replaceEpoch, session, MaxEdgesPerParty).Slice()
		if err != nil {
			return Edge{}, "", storage("controller lease of "+session, err)
		}
		if len(res) != 4 {
			return Edge{}, "", storage("controller lease of "+session, errors.New("malformed answer"))
		}
		status, holder, epoch, displaced := epochOf(res[0]), strOf(res[1]), epochOf(res[2]), strOf(res[3])
		edge := Edge{Session: session, Role: Controller, Holder: holder, Scope: scope, Epoch: epoch}
		switch status {
		case -1:
			return Edge{}, "", limitErr
		case 1:
			if displaced != "" && displaced == replace && !replaceDead {
				return edge, displaced, nil
			}
			return edge, "", nil
		case 2:
			return edge, "", nil
		}
		// Held by another party: a dead holder is replaced; a live or
		// unknown one only by an allowed takeover.
		dead, err := s.dead(ctx, workspace, holder)
		if err != nil {
			return Edge{}, "", fmt.Errorf("liveness of %s: %w", holder, err)
		}
		switch {
		case dead:
		case !takeover:
			return Edge{}, "", &HeldError{Holder: holder, Epoch: epoch}
		case !mayTakeOver:
			return Edge{}, "", fmt.Errorf("%w: %s may not take the controller lease of %s over from %s", ErrForbidden, caller, session, holder)
		}
		// Compare-and-set: if the lease changed meanwhile, look again.
		replace, replaceEpoch, replaceDead = holder, epoch, dead
	}
	return Edge{}, "", storage("controller lease of "+session, errors.New("contended; retry"))
}

// Release drops caller's edge of the role on session. Only the holder
// releases a controller lease; anyone else (and an observer that is not
// one) gets ErrNotFound.
func (s *Store) Release(ctx context.Context, workspace, session, caller, role string) error {
	if err := checkIDs(workspace, session); err != nil {
		return err
	}
	switch role {
	case Controller:
		n, err := releaseScript.Run(ctx, s.rdb, []string{s.ctlKey(workspace, session), s.heldKey(workspace, caller)}, caller, session).Int()
		if err != nil {
			return storage("release "+session, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: %s does not hold the controller lease of %s", ErrNotFound, caller, session)
		}
		return nil
	case Observer:
		n, err := s.rdb.HDel(ctx, s.obsKey(workspace, session), caller).Result()
		if err != nil {
			return storage("release "+session, err)
		}
		if err := s.rdb.SRem(ctx, s.watchKey(workspace, caller), session).Err(); err != nil {
			return storage("release "+session, err)
		}
		if n == 0 {
			return fmt.Errorf("%w: %s does not observe %s", ErrNotFound, caller, session)
		}
		return nil
	}
	return invalid("role %q must be controller or observer", role)
}

// SetDefaultController makes session:<parent> the controller of child, with
// scope subtree, unless child has a controller already (docs/design.md §6: spawning
// makes the parent the controller unless one is set).
func (s *Store) SetDefaultController(ctx context.Context, workspace, child, parent string) error {
	if err := checkIDs(workspace, child); err != nil {
		return err
	}
	if !event.ValidID(parent) || parent == child {
		return invalid("parent %q of %s", parent, child)
	}
	holder := event.SessionSubject(parent)
	if err := defaultScript.Run(ctx, s.rdb, []string{s.ctlKey(workspace, child), s.heldKey(workspace, holder)}, holder, child).Err(); err != nil {
		return storage("default controller of "+child, err)
	}
	return nil
}

// Get returns the edges of one session: its controller first, then its
// observers by party.
func (s *Store) Get(ctx context.Context, workspace, session string) ([]Edge, error) {
	m, err := s.EdgesFor(ctx, workspace, []string{session})
	if err != nil {
		return nil, err
	}
	return m[session], nil
}

// MaxSessions caps the sessions of one EdgesFor call (a lineage is at most
// 32 ancestors).
const MaxSessions = 256

// EdgesFor returns the edges of each session in one round trip — the
// router passes a session and its lineage. Sessions with no edge are
// absent from the map. Each list has the controller first, then the
// observers by party.
func (s *Store) EdgesFor(ctx context.Context, workspace string, sessions []string) (map[string][]Edge, error) {
	p := s.rdb.Pipeline()
	read := s.QueueEdgesFor(ctx, p, workspace, sessions)
	_, _ = p.Exec(ctx) // each command's error is read by read
	return read()
}

// QueueEdgesFor queues the reads of EdgesFor on p (a pipeline, so that a
// caller reads several things in one round trip); the func it returns
// answers as EdgesFor once p has run.
func (s *Store) QueueEdgesFor(ctx context.Context, p redis.Pipeliner, workspace string, sessions []string) func() (map[string][]Edge, error) {
	if len(sessions) > MaxSessions {
		err := invalid("at most %d sessions at once", MaxSessions)
		return func() (map[string][]Edge, error) { return nil, err }
	}
	for _, id := range sessions {
		if err := checkIDs(workspace, id); err != nil {
			return func() (map[string][]Edge, error) { return nil, err }
		}
	}
	ctls := make([]*redis.SliceCmd, len(sessions))
	obss := make([]*redis.MapStringStringCmd, len(sessions))
	for i, id := range sessions {
		ctls[i] = p.HMGet(ctx, s.ctlKey(workspace, id), "holder", "epoch", "scope")
		obss[i] = p.HGetAll(ctx, s.obsKey(workspace, id))
	}
	return func() (map[string][]Edge, error) {
		out := map[string][]Edge{}
		for i, id := range sessions {
			c, err := ctls[i].Result()
			if err != nil {
				return nil, storage("supervision edges", err)
			}
			obs, err := obss[i].Result()
			if err != nil {
				return nil, storage("supervision edges", err)
			}
			var edges []Edge
			if holder := strOf(c[0]); holder != "" {
				edges = append(edges, Edge{Session: id, Role: Controller, Holder: holder, Epoch: epochOf(c[1]), Scope: strOf(c[2])})
			}
			observers := len(edges)
			for holder, scope := range obs {
				edges = append(edges, Edge{Session: id, Role: Observer, Holder: holder, Scope: scope})
			}
			slices.SortFunc(edges[observers:], func(a, b Edge) int { return strings.Compare(a.Holder, b.Holder) })
			if len(edges) > 0 {
				out[id] = edges
			}
		}
		return out, nil
	}
}
