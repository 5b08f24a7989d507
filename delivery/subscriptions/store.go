package subscriptions

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/kind"
)

// Store keeps subscriptions in Redis.
type Store struct {
	rdb    redis.UniversalClient
	prefix string
	now    func() time.Time
	max    int // subscriptions per party
}

// DefaultMaxPerParty is how many live subscriptions one party may have
// unless configured (WAKEGATE_MAX_SUBSCRIPTIONS, docs/design.md §10).
const DefaultMaxPerParty = 1000

// ErrLimit is returned by Create for a party that has as many
// subscriptions as it may (answer 422).
var ErrLimit = kind.New(kind.Limit, "subscription limit reached")

// New returns a store whose keys start with prefix (WAKEGATE_REDIS_PREFIX).
func New(rdb redis.UniversalClient, prefix string) *Store {
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	return &Store{rdb: rdb, prefix: prefix, now: time.Now, max: DefaultMaxPerParty}
}

// WithMaxPerParty caps the live subscriptions of one party at n (≤ 0:
// DefaultMaxPerParty).
func (s *Store) WithMaxPerParty(n int) *Store {
	c := *s
	c.max = n
	if n <= 0 {
		c.max = DefaultMaxPerParty
	}
	return &c
}

// MaxPerParty is the cap of WithMaxPerParty.
func (s *Store) MaxPerParty() int { return s.max }

// WithClock makes the store read time from now (List and Match use it to
// drop subscriptions whose until time has passed); for tests.
func (s *Store) WithClock(now func() time.Time) *Store {
	c := *s
	c.now = now
	return &c
}

// tag is the hash-tagged stem of every key of a workspace.
func (s *Store) tag(ws string) string { return keyspace.Subscriptions(s.prefix, ws) }

func (s *Store) subsKey(ws string) string          { return s.tag(ws) + ":subs" }
func (s *Store) ixofKey(ws string) string          { return s.tag(ws) + ":ixof" }
func (s *Store) ownKey(ws, owner string) string    { return s.tag(ws) + ":own:" + owner }
func (s *Store) termKey(ws, subject string) string { return s.tag(ws) + ":term:" + subject }
func (s *Store) ixKey(ws, kind, v string) string   { return s.tag(ws) + ":ix:" + kind + ":" + v }
func (s *Store) expiryKey() string                 { return keyspace.SubscriptionExpiry(s.prefix) }

// Index kinds.
const (
	ixType  = "type"
	ixTPre  = "tpre"
	ixSubj  = "subj"
	ixSPre  = "spre"
	ixSelf  = "self"
	ixTree  = "tree"
	ixLabel = "label"
)

// indexKeys picks the one filter a subscription is indexed under (the most
// selective it has) and returns a set key per value of it.
func (s *Store) indexKeys(sub *Subscription) []string {
	ws := sub.Workspace
	var keys []string
	switch {
	case len(sub.Subjects) > 0 && !slices.ContainsFunc(sub.Subjects, isGlob):
		for _, v := range sub.Subjects {
			keys = append(keys, s.ixKey(ws, ixSubj, v))
		}
	case sub.Session != nil && sub.Session.Scope == ScopeSelf:
		keys = append(keys, s.ixKey(ws, ixSelf, sub.Session.ID))
	case sub.Session != nil:
		keys = append(keys, s.ixKey(ws, ixTree, sub.Session.ID))
	case len(sub.Labels) > 0:
		for _, v := range sub.Labels {
			keys = append(keys, s.ixKey(ws, ixLabel, v))
		}
	case len(sub.Subjects) > 0:
		for _, v := range sub.Subjects {
			if p, ok := strings.CutSuffix(v, "*"); ok {
				keys = append(keys, s.ixKey(ws, ixSPre, p))
			} else {
				keys = append(keys, s.ixKey(ws, ixSubj, v))
			}
		}
	default: // types: normalize guarantees at least one filter
		for _, v := range sub.Types {
			if p, ok := strings.CutSuffix(v, ".*"); ok {
				keys = append(keys, s.ixKey(ws, ixTPre, p))
			} else {
				keys = append(keys, s.ixKey(ws, ixType, v))
			}
		}
	}
	return keys
}

// eventKeys are the index sets an event can find its candidates in.
func (s *Store) eventKeys(e *event.Event, labels []string) []string {
	ws := e.Workspace
	keys := []string{s.ixKey(ws, ixType, e.Type)}
	for i := range len(e.Type) {
		if e.Type[i] == '.' {
			keys = append(keys, s.ixKey(ws, ixTPre, e.Type[:i]))
		}
	}
	if e.Subject != "" {
		keys = append(keys, s.ixKey(ws, ixSubj, e.Subject))
		if strings.HasPrefix(e.Subject, "github:") {
			if i := strings.IndexAny(e.Subject, "#@"); i >= 0 {
				keys = append(keys, s.ixKey(ws, ixSPre, e.Subject[:i+1]))
			}
		}
	}
	if e.SessionID != "" {
		keys = append(keys, s.ixKey(ws, ixSelf, e.SessionID), s.ixKey(ws, ixTree, e.SessionID))
		for _, a := range e.Lineage {
			keys = append(keys, s.ixKey(ws, ixTree, a))
		}
		for _, l := range labels {
			keys = append(keys, s.ixKey(ws, ixLabel, l))
		}
	}
	slices.Sort(keys)
	return slices.Compact(keys)
}

// createScript stores a subscription and adds it to its sets.
// Its KEYS, ARGV and reply are in create.lua.
//
//go:embed create.lua
var createLua string

var createScript = keyspace.NewScript("delivery/subscriptions/create.lua", createLua)

// removeScript removes one subscription from the record and every set.
// Its KEYS, ARGV and reply are in remove.lua.
//
//go:embed remove.lua
var removeLua string

var removeScript = keyspace.NewScript("delivery/subscriptions/remove.lua", removeLua)

// matchScript reads the candidates of one or several events.
// Its KEYS, ARGV and reply are in match.lua.
//
//go:embed match.lua
var matchLua string

var matchScript = keyspace.NewScript("delivery/subscriptions/match.lua", matchLua)

// newID returns a random subscription id: 24 hex digits, so that an id never
// starts with '-' and reads as a flag on a command line.
func newID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Create validates sub (as Parse does, plus its workspace and owner), gives
// it a random url-safe ID and CreatedAt = now, stores it and indexes it. An
// until time that is not after now is refused with ErrUntil.
//
// A subscription on a subject that has already ended never sees its
// terminal event routed: use CreateWatching, or after Create check
// journal.TerminalOf for each exact subject (checking after Create, never
// before, leaves no window in which the terminal event is missed).
func (s *Store) Create(ctx context.Context, sub Subscription, now time.Time) (Subscription, error) {
	if !event.ValidWorkspace(sub.Workspace) {
		return Subscription{}, fmt.Errorf("%w: workspace %q", ErrInvalid, sub.Workspace)
	}
	if _, err := event.ParseParty(sub.Owner); err != nil {
		return Subscription{}, fmt.Errorf("%w: owner: %w", ErrInvalid, err)
	}
	sub.Types = slices.Clone(sub.Types)
	sub.Subjects = slices.Clone(sub.Subjects)
	sub.Labels = slices.Clone(sub.Labels)
	if sub.Session != nil {
		f := *sub.Session
		sub.Session = &f
	}
	if err := normalize(&sub); err != nil {
		return Subscription{}, err
	}
	if t := sub.UntilTime(); !t.IsZero() && !t.After(now) {
		return Subscription{}, fmt.Errorf("%w: until %s has passed", ErrUntil, sub.Until)
	}
	sub.CreatedAt = now.UTC()
	sets := append([]string{s.ownKey(sub.Workspace, sub.Owner)}, s.indexKeys(&sub)...)
	if sub.Until == UntilSubjectTerminal {
		sets = append(sets, s.termKey(sub.Workspace, sub.Subjects[0]))
	}
	ixof, _ := json.Marshal(sets)
	keys := append([]string{s.subsKey(sub.Workspace), s.ixofKey(sub.Workspace)}, sets...)
	swept := false
	for range 4 {
		sub.ID = newID()
		if t := sub.UntilTime(); !t.IsZero() {
			// Before the record: a sweep only finds what has ended, and
			// this has not, so an orphan member here is harmless.
			if err := s.rdb.ZAdd(ctx, s.expiryKey(), redis.Z{Score: float64(t.UnixMilli()), Member: sub.Workspace + "/" + sub.ID}).Err(); err != nil {
				return Subscription{}, fmt.Errorf("create subscription: %w", err)
			}
		}
		body, err := json.Marshal(sub)
		if err != nil {
			return Subscription{}, fmt.Errorf("create subscription: %w", err)
		}
		n, err := createScript.Run(ctx, s.rdb, keys, sub.ID, body, ixof, s.max).Int()
		if err != nil {
			return Subscription{}, fmt.Errorf("create subscription: %w", err)
		}
		if n == -1 && !swept { // the owner's set may hold expired ones: List removes them
			swept = true
			if _, err := s.List(ctx, sub.Workspace, sub.Owner); err != nil {
				return Subscription{}, fmt.Errorf("create subscription: %w", err)
			}
			continue
		}
		if n == -1 {
			s.rdb.ZRem(ctx, s.expiryKey(), sub.Workspace+"/"+sub.ID)
			return Subscription{}, fmt.Errorf("%w: a party has at most %d subscriptions (WAKEGATE_MAX_SUBSCRIPTIONS); delete one first", ErrLimit, s.max)
		}
		if n == 1 {
			return sub, nil
		}
	}
	return Subscription{}, errors.New("create subscription: no free id")
}

// Page returns up to limit of the owner's live subscriptions after the
// cursor after ("" for the first page), oldest first, and the cursor of
// the next page ("" when there is none). A party holds at most
// MaxPerParty, so a page costs at most that many reads.
func (s *Store) Page(ctx context.Context, workspace, owner, after string, limit int) ([]Subscription, string, error) {
	var at time.Time
	var atID string
	if after != "" {
		b, err := base64.RawURLEncoding.DecodeString(after)
		ms, id, ok := strings.Cut(string(b), ".")
		n, perr := strconv.ParseInt(ms, 10, 64)
		if err != nil || !ok || perr != nil || id == "" {
			return nil, "", fmt.Errorf("%w: after is not a cursor this list issued", ErrInvalid)
		}
		at, atID = time.Unix(0, n).UTC(), id
	}
	all, err := s.List(ctx, workspace, owner)
	if err != nil {
		return nil, "", err
	}
	out := make([]Subscription, 0, min(limit, len(all)))
	for _, sub := range all {
		if after != "" {
			c := sub.CreatedAt.Compare(at)
			if c < 0 || (c == 0 && sub.ID <= atID) {
				continue
			}
		}
		if len(out) == limit {
			last := out[len(out)-1]
			return out, base64.RawURLEncoding.EncodeToString(
				[]byte(strconv.FormatInt(last.CreatedAt.UnixNano(), 10) + "." + last.ID)), nil
		}
		out = append(out, sub)
	}
	return out, "", nil
}

// List returns the owner's live subscriptions, oldest first. Expired ones
// are left out and removed.
func (s *Store) List(ctx context.Context, workspace, owner string) ([]Subscription, error) {
	subs, err := s.readSet(ctx, workspace, s.ownKey(workspace, owner))
	if err != nil {
		return nil, fmt.Errorf("list subscriptions: %w", err)
	}
	now := s.now()
	live := subs[:0]
	var expired []string
	for _, sub := range subs {
		if sub.Owner != owner {
			continue
		}
		if sub.expired(now) {
			expired = append(expired, sub.ID)
			continue
		}
		live = append(live, sub)
	}
	s.removeQuietly(ctx, workspace, expired)
	sortSubs(live)
	return live, nil
}

func (s *Store) readSet(ctx context.Context, workspace, set string) ([]Subscription, error) {
	return s.union(ctx, workspace, []string{set})
}

// union reads every subscription in the union of one event's index sets.
func (s *Store) union(ctx context.Context, workspace string, sets []string) ([]Subscription, error) {
	res, err := matchScript.Run(ctx, s.rdb, append([]string{s.subsKey(workspace)}, sets...), len(sets)).Slice()
	if err != nil {
		return nil, err
	}
	if len(res) != 1 {
		return nil, fmt.Errorf("%d replies for one event", len(res))
	}
	return decodeReply(res[0])
}

// decodeReply decodes one event's reply of matchScript.
func decodeReply(r any) ([]Subscription, error) {
	list, _ := r.([]any)
	raw := make([]string, 0, len(list))
	for _, v := range list {
		if str, ok := v.(string); ok {
			raw = append(raw, str)
		}
	}
	return decodeAll(raw)
}

func decodeAll(raw []string) ([]Subscription, error) {
	out := make([]Subscription, 0, len(raw))
	for _, r := range raw {
		var sub Subscription
		if err := json.Unmarshal([]byte(r), &sub); err != nil {
			return nil, fmt.Errorf("stored subscription: %w", err)
		}
		out = append(out, sub)
	}
	return out, nil
}

func sortSubs(subs []Subscription) {
	slices.SortFunc(subs, func(a, b Subscription) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

// Delete removes one of the owner's subscriptions from the record and every
// index. ErrNotFound when there is none with that id, or it is not the
// owner's.
func (s *Store) Delete(ctx context.Context, workspace, owner, id string) error {
	body, err := s.rdb.HGet(ctx, s.subsKey(workspace), id).Result()
	if errors.Is(err, redis.Nil) {
		return ErrNotFound
	}
	if err != nil {
		return fmt.Errorf("delete subscription: %w", err)
	}
	var sub Subscription
	if err := json.Unmarshal([]byte(body), &sub); err != nil {
		return fmt.Errorf("stored subscription %s: %w", id, err)
	}
	if sub.Owner != owner {
		return ErrNotFound
	}
	removed, err := s.remove(ctx, workspace, []string{id})
	if err != nil {
		return fmt.Errorf("delete subscription: %w", err)
	}
	if len(removed) == 0 {
		return ErrNotFound
	}
	return nil
}

// remove takes the subscriptions with these ids out of the record and
// every set; it returns the ones it removed (others were gone already).
func (s *Store) remove(ctx context.Context, workspace string, ids []string) ([]Subscription, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	entries, err := s.rdb.HMGet(ctx, s.ixofKey(workspace), ids...).Result()
	if err != nil {
		return nil, err
	}
	var out []Subscription
	stem := s.tag(workspace) + ":"
	for i, id := range ids {
		entry, ok := entries[i].(string)
		if !ok {
			continue
		}
		var sets []string
		if err := json.Unmarshal([]byte(entry), &sets); err != nil {
			return out, fmt.Errorf("stored index list of %s: %w", id, err)
		}
		for _, k := range sets {
			if !strings.HasPrefix(k, stem) {
				return out, fmt.Errorf("stored index list of %s names a foreign key %q", id, k)
			}
		}
		keys := append([]string{s.subsKey(workspace), s.ixofKey(workspace)}, sets...)
		body, err := removeScript.Run(ctx, s.rdb, keys, id, entry).Text()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return out, err
		}
		var sub Subscription
		if err := json.Unmarshal([]byte(body), &sub); err != nil {
			return out, fmt.Errorf("stored subscription %s: %w", id, err)
		}
		if !sub.UntilTime().IsZero() {
			if err := s.rdb.ZRem(ctx, s.expiryKey(), workspace+"/"+id).Err(); err != nil {
				return out, err
			}
		}
		out = append(out, sub)
	}
	return out, nil
}

// removeQuietly removes expired subscriptions found in passing. A failure
// leaves them for the next pass or Sweep: they are already ignored.
func (s *Store) removeQuietly(ctx context.Context, workspace string, ids []string) {
	if len(ids) > 0 {
		_, _ = s.remove(ctx, workspace, ids)
	}
}

// Match returns the subscriptions of e's workspace that e matches, oldest
// first. sessionLabels are the labels of the session e is about (nil when
// it has none). Candidates come only from the index sets derived from e
// (one script call); every filter is then checked (Subscription.Matches).
// Subscriptions whose until time has passed are left out and removed.
func (s *Store) Match(ctx context.Context, e *event.Event, sessionLabels []string) ([]Subscription, error) {
	subs, err := s.candidates(ctx, e, sessionLabels)
	if err != nil {
		return nil, err
	}
	return s.filter(ctx, e, sessionLabels, subs), nil
}

// QueueMatch queues Match's read on p (a pipeline, so that a caller reads
// several things in one round trip); the func it returns answers as Match
// once p has run. Should the server not know the script yet, that func
// runs it once itself.
func (s *Store) QueueMatch(ctx context.Context, p redis.Pipeliner, e *event.Event, sessionLabels []string) func() ([]Subscription, error) {
	if !event.ValidWorkspace(e.Workspace) {
		return func() ([]Subscription, error) {
			return nil, fmt.Errorf("match subscriptions: event has no valid workspace (%q)", e.Workspace)
		}
	}
	keys := append([]string{s.subsKey(e.Workspace)}, s.eventKeys(e, sessionLabels)...)
	cmd := matchScript.EvalSha(ctx, p, keys, len(keys)-1)
	return func() ([]Subscription, error) {
		res, err := cmd.Slice()
		if redis.HasErrorPrefix(err, "NOSCRIPT") {
			res, err = matchScript.Run(ctx, s.rdb, keys, len(keys)-1).Slice()
		}
		if err == nil && len(res) != 1 {
			err = fmt.Errorf("%d replies for one event", len(res))
		}
		if err != nil {
			return nil, fmt.Errorf("match subscriptions: %w", err)
		}
		subs, err := decodeReply(res[0])
		if err != nil {
			return nil, fmt.Errorf("match subscriptions: %w", err)
		}
		return s.filter(ctx, e, sessionLabels, subs), nil
	}
}

// Candidates are the subscriptions read for one event by MatchCandidates,
// to be filtered by MatchFrom.
type Candidates []Subscription

// MatchCandidates reads the candidates of several events at once — what
// Match reads for each of them with no session labels — in one script call
// per workspace (a pipeline when there are several). Pass each result to
// MatchFrom with its event, when the event is routed: filtering (time,
// every filter) happens there, so reading ahead of routing changes nothing
// but when the sets were read.
func (s *Store) MatchCandidates(ctx context.Context, events []*event.Event) ([]Candidates, error) {
	out := make([]Candidates, len(events))
	type group struct {
		idx  []int
		keys []string
		argv []any
	}
	groups := map[string]*group{}
	var order []string
	for i, e := range events {
		if !event.ValidWorkspace(e.Workspace) {
			return nil, fmt.Errorf("match subscriptions: event has no valid workspace (%q)", e.Workspace)
		}
		g := groups[e.Workspace]
		if g == nil {
			g = &group{keys: []string{s.subsKey(e.Workspace)}}
			groups[e.Workspace] = g
			order = append(order, e.Workspace)
		}
		keys := s.eventKeys(e, nil)
		g.idx = append(g.idx, i)
		g.keys = append(g.keys, keys...)
		g.argv = append(g.argv, len(keys))
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(order))
	for k, ws := range order {
		g := groups[ws]
		cmds[k] = matchScript.EvalSha(ctx, pipe, g.keys, g.argv...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		if !redis.HasErrorPrefix(err, "NOSCRIPT") {
			return nil, fmt.Errorf("match subscriptions: %w", err)
		}
		for k, ws := range order { // not loaded yet (a new or flushed server): once each
			g := groups[ws]
			cmds[k] = matchScript.Run(ctx, s.rdb, g.keys, g.argv...)
		}
	}
	for k, ws := range order {
		g := groups[ws]
		res, err := cmds[k].Slice()
		if err != nil {
			return nil, fmt.Errorf("match subscriptions: %w", err)
		}
		if len(res) != len(g.idx) {
			return nil, fmt.Errorf("match subscriptions: %d replies for %d events", len(res), len(g.idx))
		}
		for j, r := range res {
			subs, err := decodeReply(r)
			if err != nil {
				return nil, err
			}
			if len(subs) > 0 {
				out[g.idx[j]] = subs
			}
		}
	}
	return out, nil
}

// MatchFrom is Match for an event with no session labels whose candidates
// MatchCandidates has read.
func (s *Store) MatchFrom(ctx context.Context, e *event.Event, c Candidates) []Subscription {
	return s.filter(ctx, e, nil, c)
}

// filter keeps the candidates e matches, oldest first, and removes those
// whose until time has passed.
func (s *Store) filter(ctx context.Context, e *event.Event, sessionLabels []string, subs []Subscription) []Subscription {
	if len(subs) == 0 {
		return nil
	}
	now := s.now()
	var out []Subscription
	var expired []string
	for _, sub := range subs {
		if sub.expired(now) {
			expired = append(expired, sub.ID)
			continue
		}
		if sub.Matches(e, sessionLabels, now) {
			out = append(out, sub)
		}
	}
	s.removeQuietly(ctx, e.Workspace, expired)
	sortSubs(out)
	return out
}

// candidates reads every subscription in the index sets derived from e.
func (s *Store) candidates(ctx context.Context, e *event.Event, sessionLabels []string) ([]Subscription, error) {
	if !event.ValidWorkspace(e.Workspace) {
		return nil, fmt.Errorf("match subscriptions: event has no valid workspace (%q)", e.Workspace)
	}
	subs, err := s.union(ctx, e.Workspace, s.eventKeys(e, sessionLabels))
	if err != nil {
		return nil, fmt.Errorf("match subscriptions: %w", err)
	}
	return subs, nil
}

// CloseForSubject removes every "until: subject_terminal" subscription on
// exactly this subject and returns them; the router calls it when it routes
// the subject's terminal event (after delivering it: the subscriptions
// match that event, so match first, close second).
func (s *Store) CloseForSubject(ctx context.Context, workspace, subject string) ([]Subscription, error) {
	ids, err := s.rdb.SMembers(ctx, s.termKey(workspace, subject)).Result()
	if err != nil {
		return nil, fmt.Errorf("close subscriptions of %s: %w", subject, err)
	}
	slices.Sort(ids)
	out, err := s.remove(ctx, workspace, ids)
	if err != nil {
		return out, fmt.Errorf("close subscriptions of %s: %w", subject, err)
	}
	sortSubs(out)
	return out, nil
}

// Sweep removes every subscription, in any workspace, whose until time is
// at or before now, and returns how many it removed. Run it periodically:
// List and Match also drop expired subscriptions they come across, so the
// sweep only bounds memory.
func (s *Store) Sweep(ctx context.Context, now time.Time) (int, error) {
	removed := 0
	for {
		members, err := s.rdb.ZRangeArgs(ctx, redis.ZRangeArgs{Key: s.expiryKey(), ByScore: true,
			Start: "-inf", Stop: fmt.Sprint(now.UnixMilli()), Count: 500}).Result()
		if err != nil {
			return removed, fmt.Errorf("sweep subscriptions: %w", err)
		}
		for _, m := range members {
			ws, id, _ := strings.Cut(m, "/")
			out, err := s.remove(ctx, ws, []string{id})
			if err != nil {
				return removed, fmt.Errorf("sweep subscriptions: %w", err)
			}
			removed += len(out)
			if err := s.rdb.ZRem(ctx, s.expiryKey(), m).Err(); err != nil {
				return removed, fmt.Errorf("sweep subscriptions: %w", err)
			}
		}
		if len(members) < 500 {
			return removed, nil
		}
	}
}

// TerminalFunc tells whether a subject has ended: journal.(*Journal).TerminalOf.
type TerminalFunc func(ctx context.Context, workspace, subject string) (*journal.Terminal, error)

// Ended is an exact subject of a new subscription that had already ended.
type Ended struct {
	Subject  string
	Terminal *journal.Terminal
}

// Created is what CreateWatching did.
type Created struct {
	Subscription
	// Ended lists the exact subjects of the subscription that had already
	// ended. The caller delivers each one's terminal event (journal seq
	// Terminal.Seq) to the owner at once, when Subscription.Matches it.
	Ended []Ended
	// Closed is set when the subscription was "until: subject_terminal" on
	// an ended subject: it has been removed already (answer 201 with it).
	Closed bool
}

// CreateWatching is Create followed by the DeathWatch check of docs/design.md §6:
// each exact subject of the new subscription is looked up with terminalOf,
// and a subscription "until: subject_terminal" whose subject has ended is
// closed at once. Checking after storing closes the race with a terminal
// event routed meanwhile (the router's CloseForSubject then finds it; if
// both deliver, the inbox deduplicates the event).
func (s *Store) CreateWatching(ctx context.Context, sub Subscription, now time.Time, terminalOf TerminalFunc) (Created, error) {
	created, err := s.Create(ctx, sub, now)
	if err != nil {
		return Created{}, err
	}
	out := Created{Subscription: created}
	for _, subj := range created.Subjects {
		if isGlob(subj) {
			continue
		}
		t, err := terminalOf(ctx, created.Workspace, subj)
		if err != nil {
			return out, fmt.Errorf("subscription %s: %w", created.ID, err)
		}
		if t != nil {
			out.Ended = append(out.Ended, Ended{Subject: subj, Terminal: t})
		}
	}
	// A subscription whose every subject has ended can never match again:
	// it closes, whatever its until (docs/design.md §3 DeathWatch).
	if len(out.Ended) > 0 && (created.Until == UntilSubjectTerminal || len(out.Ended) == len(created.Subjects)) {
		if _, err := s.remove(ctx, created.Workspace, []string{created.ID}); err != nil {
			return out, fmt.Errorf("close subscription %s: %w", created.ID, err)
		}
		out.Closed = true
	}
	return out, nil
}
