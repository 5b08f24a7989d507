package integration

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/outbound"
	wgstack "github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/workers/tasks"
)

// TestPushQueuesSpreadOnCluster (docs/design.md §14): on a three-node
// Redis Cluster the push queues' keys — Asynq's `asynq:{<queue>}:…`, one
// slot per queue — sit on more than one node: the digests pushed to 48
// recipients are all worked (by the worker's Asynq server, on the
// cluster) and their hold releases, scheduled an hour ahead, wait on
// several nodes. With the single queue of before, every key was on one.
func TestPushQueuesSpreadOnCluster(t *testing.T) {
	t.Parallel()
	url := startRedisCluster(t)
	rdb, err := wgstack.NewClient(url, 16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	const prefix, ws, n = "wgq", "default", 48
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	guard := &outbound.Guard{AllowPrivate: true}
	endpoints := outbound.NewEndpoints(rdb, prefix, guard)
	p := tasks.New(rdb, asynq.NewClientFromRedisClient(rdb), inbox.New(rdb, inbox.Config{Prefix: prefix}), endpoints, log,
		prometheus.NewRegistry(), tasks.Config{Prefix: prefix, Guard: guard})
	h := holds.New(rdb, prefix)
	rel := tasks.NewReleaser(p, h, nil)

	var mu sync.Mutex
	got := map[string]bool{}
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got[r.Header.Get("webhook-id")] = true
		mu.Unlock()
	}))
	t.Cleanup(recv.Close)
	srvCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tasks.NewServer(rdb, p, rel, log).Run(srvCtx) }()
	t.Cleanup(func() { stop(); <-done })

	var ids []string
	for i := range n {
		party := fmt.Sprintf("human:c%d", i)
		if _, _, _, err := endpoints.Put(ctx, ws, party, outbound.Put{URL: recv.URL + "/hook"}); err != nil {
			t.Fatal(err)
		}
		id := tasks.DigestWebhookID(prefix, ws, party, "test", "1")
		if _, err := p.EnqueueDigest(ctx, ws, party, id, "held", []inbox.Entry{}); err != nil {
			t.Fatal(err)
		}
		if err := rel.Schedule(ctx, ws, party, holds.ReasonRate, time.Now().Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	waitFor(t, 30*time.Second, "every digest pushed", func() (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for _, id := range ids {
			if !got[id] {
				missing++
			}
		}
		return missing == 0, fmt.Sprintf("%d of %d not received", missing, n)
	})

	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		t.Fatalf("the client of %s is a %T", url, rdb)
	}
	var perNode sync.Map
	err = cc.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
		keys, err := node.Keys(ctx, "asynq:{"+prefix+":push*").Result()
		perNode.Store(node.Options().Addr, len(keys))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	var counts []string
	nodes := 0
	perNode.Range(func(addr, v any) bool {
		counts = append(counts, fmt.Sprintf("%s: %d", addr, v))
		if v.(int) > 0 {
			nodes++
		}
		return true
	})
	if nodes < 2 {
		t.Fatalf("the push queues' keys are on %d node(s) of 3: %s", nodes, strings.Join(counts, ", "))
	}
	t.Logf("push queue keys per node: %s", strings.Join(counts, ", "))
}
