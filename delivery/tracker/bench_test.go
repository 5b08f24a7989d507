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

// BenchmarkApplyCommandsOnly and BenchmarkSettleCommandsOnly send the
// Redis commands that apply_batch.lua and settle.lua run for a new,
// opened PR (their trace under MONITOR: reads, then the PR's hash, sha
// index, journal entry of about the same size and its markers, settle
// index) as plain pipelined commands, 128 and 100 PRs a round trip, with
// no Lua: Redis's CPU per PR of the same work, were the fold decided in
// Go. Compare with BenchmarkApplyBatchOpened and BenchmarkSettleDue in
// the same run.
func BenchmarkApplyCommandsOnly(b *testing.B) {
	rdb, prefix := redistest.New(b)
	runCommandsOnly(b, rdb, prefix, 128, func(p redis.Pipeliner, k prKeys) {
		p.HGetAll(ctx0, k.pr)
		p.HGetAll(ctx0, k.checks)
	}, func(p redis.Pipeliner, k prKeys) {
		p.SAdd(ctx0, k.sha, k.n)
		p.Expire(ctx0, k.sha, 30*24*time.Hour)
		p.HSet(ctx0, k.pr, "w", "acme", "s", "open", "d", "0", "m", "0", "b", "master", "a", "Codertocat",
			"t", "Update the README with new information.", "l", "", "u", "1796555324000", "h", benchSHA, "hs", "1796555324000")
		k.journal(p, 430)
		p.ZAdd(ctx0, k.settle, redis.Z{Score: float64(k.n), Member: k.member})
	})
}

func BenchmarkSettleCommandsOnly(b *testing.B) {
	rdb, prefix := redistest.New(b)
	runCommandsOnly(b, rdb, prefix, 128, nil, nil) // the PRs as apply leaves them
	runCommandsOnly(b, rdb, prefix, 100, func(p redis.Pipeliner, k prKeys) {
		p.HGetAll(ctx0, k.pr)
		p.HGetAll(ctx0, k.checks)
		p.HVals(ctx0, k.pr+":reviews")
	}, func(p redis.Pipeliner, k prKeys) {
		p.ZRem(ctx0, k.settle, k.member)
		k.journal(p, 454)
		p.HSet(ctx0, k.pr, "r", "1796555324624-0")
	})
}

var ctx0 = context.Background()

const benchSHA = "ec26c3e57ca3a959ca5aad62de7213c562f8c821"

// prKeys are the keys of PR n of the benchmark's repository on shard 2.
type prKeys struct {
	n                                    int
	tag, pr, checks, sha, settle, member string
}

// journal appends an entry of size bytes and its id markers, as
// journal.lua does.
func (k prKeys) journal(p redis.Pipeliner, size int) {
	p.Incr(ctx0, k.tag+":lh:1796515200")
	p.HSet(ctx0, k.tag+":lh:1796515200:0", strconv.Itoa(size*1e7+k.n), k.n)
	p.XAdd(ctx0, &redis.XAddArgs{Stream: k.tag + ":journal", MaxLen: 2500000, Approx: true,
		Values: []string{"e", strings.Repeat("e", size)}})
}

// runCommandsOnly runs read, then write, for each of b.N PRs, per round
// trips of batch PRs (the writes in MULTI/EXEC, as a guarded write
// would), and reports Redis's CPU per PR; with nil functions it writes
// the PRs' state as apply does, untimed.
func runCommandsOnly(b *testing.B, rdb *redis.Client, prefix string, batch int, read, write func(redis.Pipeliner, prKeys)) {
	timed := read != nil
	if !timed {
		read = func(redis.Pipeliner, prKeys) {}
		write = func(p redis.Pipeliner, k prKeys) {
			p.HSet(ctx0, k.pr, "w", "acme", "s", "open", "h", benchSHA)
			p.ZAdd(ctx0, k.settle, redis.Z{Score: float64(k.n), Member: k.member})
		}
	}
	tag := prefix + ":{j2}"
	keys := func(n int) prKeys {
		return prKeys{n: n, tag: tag, pr: tag + ":pr:Codertocat/Hello-World#" + strconv.Itoa(n),
			checks: tag + ":checks:Codertocat/Hello-World@" + benchSHA, sha: tag + ":sha:Codertocat/Hello-World@" + benchSHA,
			settle: tag + ":settle", member: "acme\nCodertocat/Hello-World\n" + strconv.Itoa(n) + "\n" + benchSHA}
	}
	cpu0 := redisCPU(b, rdb)
	if timed {
		b.ResetTimer()
	}
	for start := 0; start < b.N; start += batch {
		reads, writes := rdb.Pipeline(), rdb.TxPipeline()
		for n := start; n < min(start+batch, b.N); n++ {
			read(reads, keys(n))
			write(writes, keys(n))
		}
		writes.Publish(ctx0, tag+":notify", tag)
		for _, p := range []redis.Pipeliner{reads, writes} {
			if _, err := p.Exec(ctx0); err != nil {
				b.Fatal(err)
			}
		}
	}
	if timed {
		b.StopTimer()
		b.ReportMetric((redisCPU(b, rdb)-cpu0)*1e6/float64(b.N), "redis_us/op")
	}
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
