package tracker_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

// BenchmarkApplyBatchOpened folds octokit's pull_request/opened, each time
// about a new PR, in batches of 128, and reports Redis's CPU per fact
// ("redis_us/op", INFO cpu: meaningful only on a Redis nothing else uses,
// e.g. WAKEGATE_TEST_REDIS_URL=redis://127.0.0.1:6390/0).
func BenchmarkApplyBatchOpened(b *testing.B) {
	body, err := os.ReadFile(filepath.Join("..", "..", "..", "shared", "fixtures", "github", "octokit", "pull_request", "opened.payload.json"))
	if err != nil {
		b.Skipf("fixtures missing: %v", err)
	}
	f, err := github.Normalize("pull_request", body)
	if err != nil {
		b.Fatal(err)
	}
	rdb, prefix := redistest.New(b)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	tr := tracker.New(rdb, j, tracker.Config{})
	ctx := context.Background()
	items := make([]tracker.Item, 0, 128)
	flush := func() {
		for i, err := range tr.ApplyBatch(ctx, items, time.Now()) {
			if err != nil {
				b.Fatalf("item %d: %v", i, err)
			}
		}
		items = items[:0]
	}
	cpu0 := redisCPU(b, rdb)
	b.ResetTimer()
	for i := range b.N {
		g := f
		pr := *f.PR
		pr.Number = i + 1
		g.PR = &pr
		g.Subject = event.PRSubject(g.Repo, pr.Number)
		items = append(items, tracker.Item{Workspace: "acme", GUID: "guid-" + strconv.Itoa(i), Fact: &g})
		if len(items) == cap(items) {
			flush()
		}
	}
	if len(items) > 0 {
		flush()
	}
	b.StopTimer()
	b.ReportMetric((redisCPU(b, rdb)-cpu0)*1e6/float64(b.N), "redis_us/op")
}

func redisCPU(b *testing.B, rdb *redis.Client) float64 {
	info, err := rdb.Info(context.Background(), "cpu").Result()
	if err != nil {
		b.Fatal(err)
	}
	total := 0.0
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			var x float64
			if _, err := fmt.Sscan(v, &x); err == nil {
				total += x
			}
		}
	}
	return total
}
