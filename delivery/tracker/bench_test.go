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
	f := openedFact(b)
	rdb, prefix := redistest.New(b)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	tr := tracker.New(rdb, j, tracker.Config{})
	cpu0 := redisCPU(b, rdb)
	b.ResetTimer()
	openPRs(b, tr, f, b.N)
	b.StopTimer()
	b.ReportMetric((redisCPU(b, rdb)-cpu0)*1e6/float64(b.N), "redis_us/op")
}

// BenchmarkSettleDue settles b.N PRs opened with no CI at the same time,
// as after a burst of pull_request.opened: one SettleDue pass, each PR
// ready once; Redis's CPU per PR as in BenchmarkApplyBatchOpened.
func BenchmarkSettleDue(b *testing.B) {
	f := openedFact(b)
	rdb, prefix := redistest.New(b)
	j := journal.New(rdb, journal.Config{Prefix: prefix, Shards: 4})
	tr := tracker.New(rdb, j, tracker.Config{Settle: time.Second})
	openPRs(b, tr, f, b.N)
	cpu0 := redisCPU(b, rdb)
	b.ResetTimer()
	n, err := tr.SettleDue(context.Background(), time.Now().Add(time.Minute))
	b.StopTimer()
	if err != nil || n != b.N {
		b.Fatalf("SettleDue = %d, %v; want %d", n, err, b.N)
	}
	b.ReportMetric((redisCPU(b, rdb)-cpu0)*1e6/float64(b.N), "redis_us/op")
}

func openedFact(b *testing.B) *github.Fact {
	body, err := os.ReadFile(filepath.Join("..", "..", "testdata", "github", "octokit", "pull_request", "opened.payload.json"))
	if err != nil {
		b.Fatalf("fixture missing: %v", err)
	}
	f, err := github.Normalize("pull_request", body)
	if err != nil {
		b.Fatal(err)
	}
	return &f
}

// openPRs folds in n pull_request.opened facts about PRs 1..n, in batches
// of 128.
func openPRs(b *testing.B, tr *tracker.Tracker, f *github.Fact, n int) {
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
	for i := range n {
		g := *f
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
