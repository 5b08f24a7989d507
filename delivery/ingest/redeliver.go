package ingest

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"
)

// Stored returns the committed raw delivery guid, for an operator's
// redelivery (DESIGN §11): the raw record is kept under its ingest shard
// (the repository's, which the GUID does not tell) and its dedup scope
// (the hook: the App id, or a webhook's target id). Stored looks under
// every shard for each hook in one pipeline and returns the first record
// found, hooks in the order given (a GUID is shared by every hook that
// received the event: any of them derives the same facts). A delivery
// not stored under any of them, or whose raw record has expired with the
// retention, is an error wrapping ErrNotFound.
//
// The delivery's body is its own copy (not pooled): Release is not needed.
func (s *Store) Stored(ctx context.Context, guid string, hooks ...string) (*Delivery, error) {
	if guid == "" || len(hooks) == 0 {
		return nil, fmt.Errorf("stored delivery %q: %w", guid, ErrNotFound)
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, 0, len(hooks)*s.Shards())
	for _, hook := range hooks {
		for shard := range s.Shards() {
			cmds = append(cmds, pipe.Get(ctx, rawKey(s.Tag(shard), guid, hook)))
		}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("stored delivery %s: %w", guid, err)
	}
	for _, cmd := range cmds {
		v, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stored delivery %s: %w", guid, err)
		}
		d, err := decodeRaw([]byte(v))
		if err != nil {
			return nil, fmt.Errorf("stored delivery %s: %w", guid, err)
		}
		body := append([]byte(nil), d.Body...)
		Release([]*Delivery{d}) // the pooled buffer goes back; the copy stays
		d.Body = body
		return d, nil
	}
	return nil, fmt.Errorf("stored delivery %s under hook %s: %w", guid, strings.Join(hooks, " or "), ErrNotFound)
}
