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
	reportRedisCPU(b, rdb, func() { openPRs(b, tr, f, b.N) })
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
	reportRedisCPU(b, rdb, func() {
		n, err := tr.SettleDue(context.Background(), time.Now().Add(time.Minute))
		if err != nil || n != b.N {
			b.Fatalf("SettleDue = %d, %v; want %d", n, err, b.N)
		}
	})
}

// BenchmarkApplyCommandsOnly and BenchmarkSettleCommandsOnly send the
// Redis commands that apply_batch.lua and settle.lua run for a new,
// opened PR (their trace under MONITOR: reads, then the PR's hash, sha
// index, journal entry of about the same size and its markers, settle
// index) as plain commands, 128 and 100 PRs a round trip, with no Lua:
// Redis's CPU per PR of the same work, were the fold decided in Go.
// Compare with BenchmarkApplyBatchOpened and BenchmarkSettleDue in the
// same run.
func BenchmarkApplyCommandsOnly(b *testing.B) {
	rdb, prefix := redistest.New(b)
	reportRedisCPU(b, rdb, func() { sendCommands(b, rdb, prefix, 128, applyReads, applyWrites) })
}

func BenchmarkSettleCommandsOnly(b *testing.B) {
	rdb, prefix := redistest.New(b)
	sendCommands(b, rdb, prefix, 128, applyReads, applyWrites) // the PRs as apply leaves them
	reportRedisCPU(b, rdb, func() { sendCommands(b, rdb, prefix, 100, settleReads, settleWrites) })
}

const benchSHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"

// prKeys are the keys of PR n of the benchmark's repository on shard 2.
type prKeys struct {
	n                                    int
	tag, pr, checks, sha, settle, member string
}

func applyReads(p redis.Pipeliner, k prKeys) {
	p.HGetAll(bg, k.pr)
	p.HGetAll(bg, k.checks)
}

func applyWrites(p redis.Pipeliner, k prKeys) {
	p.SAdd(bg, k.sha, k.n)
	p.Expire(bg, k.sha, 30*24*time.Hour)
	p.HSet(bg, k.pr, "w", "acme", "s", "open", "d", "0", "m", "0", "b", "master", "a", "Codertocat",
		"t", "Update the README with new information.", "l", "", "u", "1796555324000", "h", benchSHA, "hs", "1796555324000")
	k.journal(p, 430)
	p.ZAdd(bg, k.settle, redis.Z{Score: float64(k.n), Member: k.member})
}

func settleReads(p redis.Pipeliner, k prKeys) {
	p.HGetAll(bg, k.pr)
	p.HGetAll(bg, k.checks)
	p.HVals(bg, k.pr+":reviews")
}

func settleWrites(p redis.Pipeliner, k prKeys) {
	p.ZRem(bg, k.settle, k.member)
	k.journal(p, 454)
	p.HSet(bg, k.pr, "r", "1796555324624-0")
}

// journal appends an entry of size bytes and its id markers, as
// journal.lua does.
func (k prKeys) journal(p redis.Pipeliner, size int) {
	p.Incr(bg, k.tag+":lh:1796515200")
	p.HSet(bg, k.tag+":lh:1796515200:0", strconv.Itoa(size*1e7+k.n), k.n)
	p.XAdd(bg, &redis.XAddArgs{Stream: k.tag + ":journal", MaxLen: 2500000, Approx: true,
		Values: []string{"e", strings.Repeat("e", size)}})
}

var bg = context.Background()

// sendCommands sends, for PRs 0..b.N-1, batch PRs at a time, their reads
// in one pipeline, then their writes in one MULTI/EXEC (as one guarded
// write would).
func sendCommands(b *testing.B, rdb *redis.Client, prefix string, batch int, reads, writes func(redis.Pipeliner, prKeys)) {
	tag := prefix + ":{j2}"
	for start := 0; start < b.N; start += batch {
		r, w := rdb.Pipeline(), rdb.TxPipeline()
		for n := start; n < min(start+batch, b.N); n++ {
			k := prKeys{n: n, tag: tag, pr: tag + ":pr:Codertocat/Hello-World#" + strconv.Itoa(n),
				checks: tag + ":checks:Codertocat/Hello-World@" + benchSHA, sha: tag + ":sha:Codertocat/Hello-World@" + benchSHA,
				settle: tag + ":settle", member: "acme\nCodertocat/Hello-World\n" + strconv.Itoa(n) + "\n" + benchSHA}
			reads(r, k)
			writes(w, k)
		}
		w.Publish(bg, tag+":notify", tag)
		for _, p := range []redis.Pipeliner{r, w} {
			if _, err := p.Exec(bg); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// reportRedisCPU times f and reports Redis's CPU per op during it.
func reportRedisCPU(b *testing.B, rdb *redis.Client, f func()) {
	cpu0 := redisCPU(b, rdb)
	b.ResetTimer()
	f()
	b.StopTimer()
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
