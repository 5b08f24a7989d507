package integration

import (
	"fmt"
	"strings"
	"testing"
)

// TestBatchAcrossShards: a batch of agent events about sessions on
// several journal shards (several slots on a Cluster) is all-or-nothing
// on a single Redis and on a three-node Redis Cluster: one bad event
// refuses it whole with nothing journaled; the good batch is accepted
// whole, every event with its seq; again, every one is a duplicate.
func TestBatchAcrossShards(t *testing.T) {
	t.Parallel()
	t.Run("single_node", func(t *testing.T) {
		t.Parallel()
		batchAcrossShards(t, newStack(t, nil))
	})
	t.Run("cluster", func(t *testing.T) {
		t.Parallel()
		url := startRedisCluster(t)
		s := &stack{t: t, prefix: "wgb", hookSecret: "hook-secret-batch", jwtSecret: []byte("jwt-secret-batch-0123456789abcdef01")}
		s.env = map[string]string{
			"WAKEGATE_REDIS_URL":              url,
			"WAKEGATE_REDIS_PREFIX":           s.prefix,
			"WAKEGATE_GITHUB_WEBHOOK_SECRETS": s.hookSecret,
			"WAKEGATE_JWT_HS256_SECRET":       string(s.jwtSecret),
		}
		batchAcrossShards(t, s)
	})
}

func batchAcrossShards(t *testing.T, s *stack) {
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	tok := s.token(t, "human:fleet", "default", "events:push events:push:any events:read events:read:any")
	var evs [][]byte
	for i := range 12 {
		evs = append(evs, ce(fmt.Sprintf("bx-%d", i), "session.turn_started",
			map[string]any{"subject": fmt.Sprintf("session:bs-%d", i)}))
	}
	bad := append(append([][]byte(nil), evs...), ce("bx-bad", "Not.A.Type", map[string]any{"subject": "session:bs-0"}))
	r := c.mustPush(t, tok, ctBatch, batch(bad...))
	checkProblem(t, r, 422)
	if got := c.journalOf(t, tok, "session.turn_started"); len(got) != 0 {
		t.Fatalf("a refused batch journaled %d events: %s", len(got), summarize(got))
	}

	r = c.mustPush(t, tok, ctBatch, batch(evs...))
	if r.Status != 202 {
		t.Fatalf("batch across shards: %s, want 202", r)
	}
	var ans pushAnswer
	r.decode(t, &ans)
	shards := map[string]bool{}
	for _, a := range ans.Accepted {
		shard, _, _ := strings.Cut(a.Seq, "-")
		shards[shard] = true
	}
	if len(ans.Accepted) != len(evs) || len(ans.Duplicates) != 0 || len(shards) < 2 {
		t.Fatalf("answer %s: want all %d accepted, with seqs on several shards", r, len(evs))
	}
	got := c.journalOf(t, tok, "session.turn_started")
	if len(got) != len(evs) {
		t.Fatalf("journal holds %d of the batch's %d events: %s", len(got), len(evs), summarize(got))
	}
	r = c.mustPush(t, tok, ctBatch, batch(evs...))
	r.decode(t, &ans)
	if r.Status != 200 || len(ans.Duplicates) != len(evs) || len(ans.Accepted) != 0 {
		t.Fatalf("the batch again: %s, want 200 with every event a duplicate", r)
	}
}
