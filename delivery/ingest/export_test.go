package ingest

import (
	"context"
	"encoding/json"
	"time"

	"github.com/redis/go-redis/v9"
)

// RecordOnly commits a batch's record and applies none of it: a gateway
// that stopped right after its commit point.
func (s *Store) RecordOnly(ctx context.Context, workspace, pusher string, items []Item, now time.Time) error {
	calls, err := s.commitCalls(workspace, pusher, items, now)
	if err != nil {
		return err
	}
	rec, _ := json.Marshal(batchRecord{Calls: calls})
	return s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: s.batchKey(calls[0].Shard), Values: []any{"b", rec}}).Err()
}
