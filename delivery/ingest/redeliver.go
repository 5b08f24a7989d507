package ingest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
)

// Stored returns the committed raw delivery guid, for an operator's
// redelivery (docs/design.md §11): the raw record is kept under its ingest shard
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
	for i, cmd := range cmds {
		v, err := cmd.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("stored delivery %s: %w", guid, err)
		}
		hook, shard := hooks[i/s.Shards()], i%s.Shards()
		r, err := decodeRaw(guid, hook, []byte(v))
		if err != nil {
			return nil, fmt.Errorf("stored delivery %s: %w", guid, err)
		}
		errs := make([]error, 1)
		ds, err := s.assemble(ctx, s.Tag(shard), []*rawRecord{r}, errs)
		if err != nil {
			return nil, fmt.Errorf("stored delivery %s: %w", guid, err)
		}
		if errs[0] != nil {
			return nil, fmt.Errorf("stored delivery %s: %w", guid, errs[0])
		}
		d := ds[0]
		body := append([]byte(nil), d.Body...)
		Release([]*Delivery{d}) // the pooled buffer goes back; the copy stays
		d.Body = body
		return d, nil
	}
	return nil, fmt.Errorf("stored delivery %s under hook %s: %w", guid, strings.Join(hooks, " or "), ErrNotFound)
}

// Hooks returns the hook scopes (App ids, webhook target ids, "0" for a
// delivery without a hook header) under which the raw delivery guid is
// stored, sorted, for a redelivery by the GUID alone (docs/design.md §11).
// The scope is not known up front, so it scans for the raw records'
// keys: on every master of a Cluster, with a pattern naming the GUID, so
// the cost is one pass over the keyspace, an operator's request at a time.
func (s *Store) Hooks(ctx context.Context, guid string) ([]string, error) {
	if guid == "" {
		return nil, nil
	}
	// Every ingest shard's tag: "<prefix>:{in<N>}"; glob characters of the
	// prefix are escaped (a GUID has none: letters, digits, '.', '_', '-').
	pattern := globEscape(s.j.Config().Prefix) + ":{in*}:raw:" + guid + ":*"
	found := map[string]bool{}
	var mu sync.Mutex
	scan := func(ctx context.Context, c redis.UniversalClient) error {
		iter := c.Scan(ctx, 0, pattern, 1000).Iterator()
		for iter.Next(ctx) {
			k := iter.Val()
			hook := k[strings.LastIndexByte(k, ':')+1:]
			mu.Lock()
			found[hook] = true
			mu.Unlock()
		}
		return iter.Err()
	}
	var err error
	if cc, ok := s.rdb.(*redis.ClusterClient); ok {
		err = cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error { return scan(ctx, c) })
	} else {
		err = scan(ctx, s.rdb)
	}
	if err != nil {
		return nil, fmt.Errorf("hooks of delivery %s: %w", guid, err)
	}
	out := make([]string, 0, len(found))
	for h := range found {
		out = append(out, h)
	}
	sort.Strings(out)
	return out, nil
}

func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '*', '?', '[', ']', '\\':
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
