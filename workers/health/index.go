package health

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The fleet index: the workspaces, sessions and pull requests the feed
// has filed, for readers that list a workspace (the dashboard, docs/design.md
// §11). Reads only; the feed and the sweep keep the sets.

// Workspaces returns the workspaces the feed has seen, sorted, at most
// limit.
func (s *Sweeper) Workspaces(ctx context.Context, limit int) ([]string, error) {
	ws, err := s.rdb.SRandMemberN(ctx, s.wsKey(), int64(limit)).Result()
	if err != nil {
		return nil, fmt.Errorf("health index workspaces: %w", err)
	}
	slices.Sort(ws)
	return ws, nil
}

// Sessions returns a page of a workspace's sessions that have not exited
// (bare ids, each scored with the ms of its last event, the most recent
// first) and how many there are.
func (s *Sweeper) Sessions(ctx context.Context, ws string, offset, limit int) ([]redis.Z, int64, error) {
	zs, n, err := s.page(ctx, s.sessionsKey(ws), offset, limit)
	for i := range zs {
		zs[i].Member = strings.TrimPrefix(fmt.Sprint(zs[i].Member), "session:")
	}
	return zs, n, err
}

// PullRequests returns a page of a workspace's pull request subjects
// (github:org/repo#n) not yet seen to end, the most recent event first,
// and how many there are.
func (s *Sweeper) PullRequests(ctx context.Context, ws string, offset, limit int) ([]string, int64, error) {
	zs, n, err := s.page(ctx, s.prsKey(ws), offset, limit)
	out := make([]string, len(zs))
	for i, z := range zs {
		out[i] = fmt.Sprint(z.Member)
	}
	return out, n, err
}

func (s *Sweeper) page(ctx context.Context, key string, offset, limit int) ([]redis.Z, int64, error) {
	pipe := s.rdb.Pipeline()
	members := pipe.ZRevRangeWithScores(ctx, key, int64(offset), int64(offset+limit-1))
	card := pipe.ZCard(ctx, key)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, 0, fmt.Errorf("health index %s: %w", key, err)
	}
	return members.Val(), card.Val(), nil
}
