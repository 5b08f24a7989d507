package outbound

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/kind"
)

// ErrNotFound is returned for a dead letter that does not exist.
var ErrNotFound = kind.New(kind.NotFound, "push: not found")

// ErrEndpointUnavailable is returned for a redelivery to a party with no
// endpoint or a disabled one: PUT it first.
var ErrEndpointUnavailable = kind.New(kind.Conflict, "push: the party has no enabled endpoint")

// DeadLetter is a push that never got its 2xx: every attempt failed, or
// the endpoint answered 410. It is wakegate's record (Asynq's archive is
// bounded and is not).
type DeadLetter struct {
	ID        string    `json:"id"` // the webhook-id
	Workspace string    `json:"workspace"`
	Party     string    `json:"party"`
	Seq       int64     `json:"seq"` // the inbox update that decided the wake
	Kind      string    `json:"kind"`
	URL       string    `json:"url"`
	Format    string    `json:"format"`
	Attempts  int       `json:"attempts"`
	Status    int       `json:"last_status,omitempty"` // the last HTTP status, 0 when none came
	Error     string    `json:"last_error"`
	DecidedAt time.Time `json:"decided_at"` // when the wake was decided
	DeadAt    time.Time `json:"dead_at"`
	// Redeliveries counts the operator's redeliveries of this push.
	Redeliveries int `json:"redeliveries,omitempty"`
	// Body is the push body, byte for byte what was signed and sent.
	Body string `json:"body"`
}

// DeadLetters stores dead letters, newest first, at most Max. It is safe
// for concurrent use.
type DeadLetters struct {
	rdb       redis.UniversalClient
	hash, idx string
	max       int
}

// NewDeadLetters returns the dead letters stored on rdb under prefix,
// keeping at most max (default 100,000): past it the oldest go.
func NewDeadLetters(rdb redis.UniversalClient, prefix string, max int) *DeadLetters {
	if max <= 0 {
		max = 100_000
	}
	base := keyspace.DeadLetters(prefix)
	return &DeadLetters{rdb: rdb, hash: base + ":h", idx: base + ":z", max: max}
}

// putDeadScript stores a dead letter and drops the oldest past the cap.
// Its KEYS, ARGV and reply are in put_dead.lua.
//
//go:embed put_dead.lua
var putDeadLua string

var putDeadScript = keyspace.NewScript("delivery/outbound/put_dead.lua", putDeadLua)

// Put records d (replacing a record of the same id).
func (s *DeadLetters) Put(ctx context.Context, d DeadLetter) error {
	b, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encode dead letter %s: %w", d.ID, err)
	}
	if err := putDeadScript.Run(ctx, s.rdb, []string{s.hash, s.idx}, d.ID, b, d.DeadAt.UnixMilli(), s.max).Err(); err != nil {
		return fmt.Errorf("put dead letter %s: %w", d.ID, err)
	}
	return nil
}

// Get returns the dead letter id, or ErrNotFound.
func (s *DeadLetters) Get(ctx context.Context, id string) (DeadLetter, error) {
	raw, err := s.rdb.HGet(ctx, s.hash, id).Result()
	if errors.Is(err, redis.Nil) {
		return DeadLetter{}, ErrNotFound
	}
	if err != nil {
		return DeadLetter{}, fmt.Errorf("get dead letter %s: %w", id, err)
	}
	var d DeadLetter
	if err := json.Unmarshal([]byte(raw), &d); err != nil {
		return DeadLetter{}, fmt.Errorf("decode dead letter %s: %w", id, err)
	}
	return d, nil
}

// List returns up to limit dead letters, newest first, and the total.
func (s *DeadLetters) List(ctx context.Context, limit int) ([]DeadLetter, int64, error) {
	if limit <= 0 {
		limit = 100
	}
	// One MULTI, so the page and the count agree.
	pipe := s.rdb.TxPipeline()
	page := pipe.ZRevRange(ctx, s.idx, 0, int64(limit)-1)
	count := pipe.ZCard(ctx, s.idx)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, 0, fmt.Errorf("list dead letters: %w", err)
	}
	ids, total := page.Val(), count.Val()
	if len(ids) == 0 {
		return []DeadLetter{}, total, nil
	}
	raws, err := s.rdb.HMGet(ctx, s.hash, ids...).Result()
	if err != nil {
		return nil, 0, fmt.Errorf("list dead letters: %w", err)
	}
	out := make([]DeadLetter, 0, len(raws))
	for _, r := range raws {
		raw, ok := r.(string)
		if !ok {
			continue // removed in between
		}
		var d DeadLetter
		if err := json.Unmarshal([]byte(raw), &d); err != nil {
			return nil, 0, fmt.Errorf("decode dead letter: %w", err)
		}
		out = append(out, d)
	}
	return out, total, nil
}

// Remove deletes the dead letter id; it reports whether there was one.
func (s *DeadLetters) Remove(ctx context.Context, id string) (bool, error) {
	var n *redis.IntCmd
	_, err := s.rdb.TxPipelined(ctx, func(p redis.Pipeliner) error {
		n = p.HDel(ctx, s.hash, id)
		p.ZRem(ctx, s.idx, id)
		return nil
	})
	if err != nil {
		return false, fmt.Errorf("remove dead letter %s: %w", id, err)
	}
	return n.Val() > 0, nil
}
