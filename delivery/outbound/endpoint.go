package outbound

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
)

// Endpoint is where a party's pushes go.
type Endpoint struct {
	Workspace string
	Party     string
	URL       string
	Format    string // FormatStandard or FormatSlack
	Secret    string // whsec_…; never logged, shown only at creation and rotation
	CreatedAt time.Time
	UpdatedAt time.Time
	// DisabledAt is when a 410 disabled the endpoint (zero while enabled);
	// a PUT enables it again.
	DisabledAt     time.Time
	DisabledReason string
}

// Disabled reports whether pushes to the endpoint stopped.
func (e *Endpoint) Disabled() bool { return !e.DisabledAt.IsZero() }

// SecretRotate as the secret of a Put makes a fresh one.
const SecretRotate = "rotate"

// Put is the request of PUT /v1/endpoints/{party}.
type Put struct {
	URL    string
	Format string // default FormatStandard
	// Secret: "" keeps the endpoint's secret (a new endpoint gets a fresh
	// one); SecretRotate makes a fresh one; a whsec_ value sets it.
	Secret string
}

// Endpoints stores the push endpoint of each (workspace, party). It is
// safe for concurrent use.
type Endpoints struct {
	rdb    redis.UniversalClient
	prefix string
	guard  *Guard
	now    func() time.Time
}

// NewEndpoints returns the endpoints stored on rdb under prefix; guard
// checks every URL put.
func NewEndpoints(rdb redis.UniversalClient, prefix string, guard *Guard) *Endpoints {
	if guard == nil {
		guard = &Guard{}
	}
	return &Endpoints{rdb: rdb, prefix: prefixOr(prefix), guard: guard, now: time.Now}
}

// keys of one endpoint (package doc).
type epKeys struct{ ep, breaker, window string }

func endpointKeys(prefix, workspace, party string) epKeys {
	base := keyspace.Endpoint(prefix, workspace, party)
	return epKeys{ep: base + ":ep", breaker: base + ":br", window: base + ":bw"}
}

func checkParty(workspace, party string) error {
	if !event.ValidWorkspace(workspace) {
		return invalid("workspace %q", workspace)
	}
	if _, err := event.ParseParty(party); err != nil {
		return invalid("%v", err)
	}
	return nil
}

// putScript sets an endpoint, keeping or replacing its secret, enables it
// and resets its circuit breaker.
// Its KEYS, ARGV and reply are in put.lua.
//
//go:embed put.lua
var putLua string

var putScript = keyspace.NewScript("delivery/outbound/put.lua", putLua)

// Put creates or replaces the endpoint of (workspace, party). The URL is
// checked by the guard (errors wrap ErrInvalid or ErrRefused). It returns
// the endpoint, whether it was created, and whether its secret is new to
// the caller (created, rotated or set) and may be shown in full.
func (s *Endpoints) Put(ctx context.Context, workspace, party string, p Put) (ep Endpoint, created, showSecret bool, err error) {
	if err := checkParty(workspace, party); err != nil {
		return Endpoint{}, false, false, err
	}
	if p.Format == "" {
		p.Format = FormatStandard
	}
	if p.Format != FormatStandard && p.Format != FormatSlack {
		return Endpoint{}, false, false, invalid("format %q: want standard or slack", p.Format)
	}
	secret := p.Secret
	switch secret {
	case "":
	case SecretRotate:
		secret = NewSecret()
	default:
		if _, err := ParseSecret(secret); err != nil {
			return Endpoint{}, false, false, err
		}
	}
	if err := s.guard.CheckURL(ctx, p.URL); err != nil {
		return Endpoint{}, false, false, err
	}
	k := endpointKeys(s.prefix, workspace, party)
	now := s.now()
	res, err := putScript.Run(ctx, s.rdb, []string{k.ep, k.breaker, k.window},
		p.URL, p.Format, secret, NewSecret(), now.UnixMilli()).Slice()
	if err != nil {
		return Endpoint{}, false, false, fmt.Errorf("put endpoint of %s: %w", party, err)
	}
	isNew, _ := res[0].(int64)
	stored, _ := res[1].(string)
	shown, _ := res[2].(int64)
	got, err := s.Get(ctx, workspace, party)
	if err != nil {
		return Endpoint{}, false, false, err
	}
	if got == nil { // deleted in between: report what was put
		got = &Endpoint{Workspace: workspace, Party: party, URL: p.URL, Format: p.Format, Secret: stored, CreatedAt: now, UpdatedAt: now}
	}
	return *got, isNew == 1, shown == 1, nil
}

// Get returns the endpoint of (workspace, party), nil when it has none.
func (s *Endpoints) Get(ctx context.Context, workspace, party string) (*Endpoint, error) {
	if err := checkParty(workspace, party); err != nil {
		return nil, err
	}
	return endpointFrom(workspace, party, s.rdb.HGetAll(ctx, endpointKeys(s.prefix, workspace, party).ep))
}

// QueueGet queues Get's read on p (a pipeline, so that a caller reads
// several things in one round trip); the func it returns answers as Get
// once p has run.
func (s *Endpoints) QueueGet(ctx context.Context, p redis.Pipeliner, workspace, party string) func() (*Endpoint, error) {
	if err := checkParty(workspace, party); err != nil {
		return func() (*Endpoint, error) { return nil, err }
	}
	cmd := p.HGetAll(ctx, endpointKeys(s.prefix, workspace, party).ep)
	return func() (*Endpoint, error) { return endpointFrom(workspace, party, cmd) }
}

func endpointFrom(workspace, party string, cmd *redis.MapStringStringCmd) (*Endpoint, error) {
	m, err := cmd.Result()
	if err != nil {
		return nil, fmt.Errorf("get endpoint of %s: %w", party, err)
	}
	if m["url"] == "" {
		return nil, nil
	}
	ep := &Endpoint{Workspace: workspace, Party: party, URL: m["url"], Format: m["format"], Secret: m["secret"],
		CreatedAt: msTime(m["created_at"]), UpdatedAt: msTime(m["updated_at"]),
		DisabledAt: msTime(m["disabled_at"]), DisabledReason: m["disabled_reason"]}
	return ep, nil
}

func msTime(s string) time.Time {
	ms, err := strconv.ParseInt(s, 10, 64)
	if err != nil || ms == 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms).UTC()
}

// Delete removes the endpoint of (workspace, party) and its breaker
// state; it reports whether there was one.
func (s *Endpoints) Delete(ctx context.Context, workspace, party string) (bool, error) {
	if err := checkParty(workspace, party); err != nil {
		return false, err
	}
	k := endpointKeys(s.prefix, workspace, party)
	n, err := s.rdb.Del(ctx, k.ep, k.breaker, k.window).Result()
	if err != nil {
		return false, fmt.Errorf("delete endpoint of %s: %w", party, err)
	}
	return n > 0, nil
}

// disableScript disables an endpoint that still has the URL a push was
// refused by: a PUT with a new URL in between wins.
// Its KEYS, ARGV and reply are in disable.lua.
//
//go:embed disable.lua
var disableLua string

var disableScript = keyspace.NewScript("delivery/outbound/disable.lua", disableLua)

// Disable stops pushes to the endpoint of (workspace, party) while its
// URL is still url; it reports whether it did.
func (s *Endpoints) Disable(ctx context.Context, workspace, party, url, reason string) (bool, error) {
	if err := checkParty(workspace, party); err != nil {
		return false, err
	}
	n, err := disableScript.Run(ctx, s.rdb, []string{endpointKeys(s.prefix, workspace, party).ep},
		url, s.now().UnixMilli(), reason).Int()
	if err != nil {
		return false, fmt.Errorf("disable endpoint of %s: %w", party, err)
	}
	return n == 1, nil
}
