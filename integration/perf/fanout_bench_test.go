package perf

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	wgstack "github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/tasks"
)

// BenchmarkFanout is the "one event fanned out to 1,000 recipients
// with push endpoints (a local receiver): every signed delivery made
// within 2 s, the cost per recipient the same at 10 and at 1,000".
//
// Each sub-benchmark assembles wakegate with package stack as serve
// does — the router with pushes and holds, the Asynq server (64 pushes at
// once) — on a fresh prefix of a private redis-server (AOF everysec, as
// production runs it; private so that its CPU is ours alone), with
// private endpoints allowed (WAKEGATE_ALLOW_PRIVATE_ENDPOINTS). recipients sessions each
// subscribe to session.awaiting_input and have a push endpoint on one
// local receiver (an httptest server on loopback) that checks every
// delivery's Standard Webhooks signature against that endpoint's secret
// and answers 204; the workspace rate cap is raised out of the way. One
// op is one session.awaiting_input, about a fresh session each time,
// committed to the journal as the gateway commits it (ingest), and ends
// when the receiver has the last of its recipients' signed deliveries.
//
// Reported per fan-out: "ms/fanout" (mean, journal commit to the last
// delivery received), "p50_ms", "max_ms" (target: under 2,000 at 1,000
// recipients), "route_ms" (commit to the router's cursor past the event:
// every inbox written and every push enqueued), "us/recipient" (the mean
// ÷ recipients), "cpu_us/recipient" (this process's CPU — router, Asynq,
// pushes and the receiver — plus Redis's, per delivery, less what the
// assembly burns idle over the same time), and at 1,000 "cost_ratio" and
// "cpu_ratio": its per-recipient wall time and CPU ÷ those at 10 (target:
// about 1 or less).
//
//	go test ./integration/perf -run '^$' -bench Fanout -benchtime=10x -count=1
func BenchmarkFanout(b *testing.B) {
	url := startRedis(b)
	var perRecipient10, cpu10 float64
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("recipients=%d", n), func(b *testing.B) {
			wall, cpu := runFanout(b, url, n)
			if n == 10 {
				perRecipient10, cpu10 = wall, cpu
			} else if perRecipient10 > 0 {
				b.ReportMetric(wall/perRecipient10, "cost_ratio")
				b.ReportMetric(cpu/cpu10, "cpu_ratio")
			}
		})
	}
}

// fanReceiver is the local push endpoint of every recipient: /r/<i>.
type fanReceiver struct {
	secrets []string
	mu      sync.Mutex
	rounds  map[string]*fanRound // event id → its round
	bad     []string             // failed checks
}

type fanRound struct {
	want int
	got  map[string]bool // webhook-ids
	last time.Time
	done chan struct{}
}

func (fr *fanReceiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	at := time.Now()
	body, _ := io.ReadAll(r.Body)
	i, err := strconv.Atoi(strings.TrimPrefix(r.URL.Path, "/r/"))
	var b struct {
		Event struct {
			ID string `json:"id"`
		} `json:"event"`
	}
	_ = json.Unmarshal(body, &b)
	fr.mu.Lock()
	defer fr.mu.Unlock()
	switch {
	case err != nil || i < 0 || i >= len(fr.secrets):
		fr.bad = append(fr.bad, "unknown path "+r.URL.Path)
	case outbound.Verify(fr.secrets[i], r.Header, body, at, time.Minute) != nil:
		fr.bad = append(fr.bad, "bad signature on "+r.URL.Path)
	case fr.rounds[b.Event.ID] == nil:
		fr.bad = append(fr.bad, "a delivery of no round: "+b.Event.ID)
	default:
		rd := fr.rounds[b.Event.ID]
		id := r.Header.Get("webhook-id")
		if !rd.got[id] {
			rd.got[id] = true
			rd.last = at
			if len(rd.got) == rd.want {
				close(rd.done)
			}
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

// runFanout runs b.N fan-outs to n recipients and reports them; it
// returns the mean wall time and CPU per recipient (ns).
func runFanout(b *testing.B, url string, n int) (wallPerRecipient, cpuPerRecipient float64) {
	ctx := context.Background()
	rdb := newClient(b, url)
	prefix := redistest.Prefix()
	b.Cleanup(func() { // after the workers have stopped (registered first, runs last)
		for _, queue := range tasks.Queues(prefix, tasks.DefaultQueues) {
			_ = asynq.NewInspectorFromRedisClient(rdb).DeleteQueue(queue, true)
			redistest.Flush(rdb, "asynq:{"+queue+"}")
		}
		redistest.Flush(rdb, prefix)
		_ = rdb.Close()
	})
	st, err := wgstack.New(rdb, wgstack.Config{Prefix: prefix, Shards: shards, AllowPrivateEndpoints: true},
		slog.New(slog.DiscardHandler), prometheus.NewRegistry())
	if err != nil {
		b.Fatal(err)
	}
	const ws = "default"
	if _, err := st.Sup.MergeSettings(ctx, ws, []byte(`{"rate":{"per":"1s","burst":10000}}`)); err != nil {
		b.Fatal(err)
	}
	recv := &fanReceiver{secrets: make([]string, n), rounds: map[string]*fanRound{}}
	srv := httptest.NewServer(recv)
	b.Cleanup(srv.Close)
	filter, err := subscriptions.Parse([]byte(`{"types":["session.awaiting_input"]}`))
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		party := fmt.Sprintf("session:fan-r%04d", i)
		ep, _, _, err := st.Endpoints.Put(ctx, ws, party, outbound.Put{URL: fmt.Sprintf("%s/r/%d", srv.URL, i)})
		if err != nil {
			b.Fatal(err)
		}
		recv.secrets[i] = ep.Secret
		sub := filter
		sub.Workspace, sub.Owner = ws, party
		if _, err := st.Subs.Create(ctx, sub, time.Now()); err != nil {
			b.Fatal(err)
		}
	}
	components, _ := st.Workers()
	wctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range components {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(wctx) }()
	}
	b.Cleanup(func() { cancel(); wg.Wait() })

	round := 0
	var routed time.Duration // summed over the fan-outs
	fanout := func() time.Duration {
		round++
		src := fmt.Sprintf("fan-src%05d", round)
		e := &event.Event{SpecVersion: event.SpecVersion, ID: fmt.Sprintf("ask-%05d", round),
			Source: event.AgentSource(ws, "session:"+src), Type: "session.awaiting_input", Subject: event.SessionSubject(src),
			Workspace: ws, SessionID: src, Time: time.Now().UTC(), CoalesceKey: event.SessionSubject(src),
			Priority: event.Attention, Summary: src + " waits for input"}
		rd := &fanRound{want: n, got: map[string]bool{}, done: make(chan struct{})}
		recv.mu.Lock()
		recv.rounds[e.ID] = rd
		recv.mu.Unlock()
		start := time.Now()
		res, err := st.Ingest.CommitEvents(ctx, ws, "session:"+src, []ingest.Item{{Event: e, Journal: true}}, start)
		if err != nil {
			b.Fatal(err)
		}
		// The router has delivered to every recipient (and enqueued every
		// push) once its shard's cursor is past the event.
		shard, sid, _ := journal.ParseSeq(res[0].Seq)
		for {
			cur, _ := rdb.Get(ctx, st.Journal.Tag(shard)+":cursor").Result()
			if cur != "" && !streamBefore(cur, sid) {
				routed += time.Since(start)
				break
			}
			time.Sleep(time.Millisecond)
		}
		select {
		case <-rd.done:
		case <-time.After(60 * time.Second):
			recv.mu.Lock()
			got, bad := len(rd.got), recv.bad
			recv.mu.Unlock()
			b.Fatalf("fan-out %d: %d of %d deliveries after 60 s; failed checks: %v", round, got, n, bad)
		}
		recv.mu.Lock()
		defer recv.mu.Unlock()
		return rd.last.Sub(start)
	}
	fanout() // warm-up: connections, pools, scripts loaded

	// What the assembly burns doing nothing (Asynq's and the consumers'
	// polling, heartbeats), per second: subtracted from the fan-outs' CPU
	// so that it measures what a delivery costs, not how long it waited.
	idle0, idleRedis0, idleAt := cpuTime(), redisCPU(b, rdb), time.Now()
	time.Sleep(2 * time.Second)
	idleRate := float64(cpuTime()-idle0+redisCPU(b, rdb)-idleRedis0) / float64(time.Since(idleAt))

	redisCPU0 := redisCPU(b, rdb)
	cpu0 := cpuTime()
	began := time.Now()
	load := loadAvg()
	lat := make([]time.Duration, 0, b.N)
	routed = 0
	b.ResetTimer()
	for range b.N {
		lat = append(lat, fanout())
	}
	b.StopTimer()
	elapsed := time.Since(began)
	cpu := float64(cpuTime()-cpu0) + float64(redisCPU(b, rdb)-redisCPU0) - idleRate*float64(elapsed)
	recv.mu.Lock()
	bad := recv.bad
	recv.mu.Unlock()
	if len(bad) > 0 {
		b.Fatalf("%d deliveries failed the receiver's checks; first: %s", len(bad), bad[0])
	}
	var sum time.Duration
	for _, l := range lat {
		sum += l
	}
	mean := float64(sum) / float64(len(lat))
	slices.Sort(lat)
	b.ReportMetric(mean/1e6, "ms/fanout")
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50_ms")
	b.ReportMetric(float64(lat[len(lat)-1])/1e6, "max_ms")
	b.ReportMetric(mean/float64(n)/1e3, "us/recipient")
	b.ReportMetric(float64(routed)/float64(b.N)/1e6, "route_ms")
	cpuPer := cpu / float64(b.N*n)
	b.ReportMetric(cpuPer/1e3, "cpu_us/recipient")
	b.Logf("%d fan-outs to %d recipients: mean %v (routing %v), p50 %v, max %v; CPU per delivery %.0f µs (idle %.1f%% of a core subtracted); load average before %s, after %s",
		b.N, n, time.Duration(mean).Round(time.Millisecond), (routed / time.Duration(b.N)).Round(time.Millisecond),
		lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)-1].Round(time.Millisecond), cpu/float64(b.N*n)/1e3,
		idleRate*100, load, loadAvg())
	return mean / float64(n), cpuPer
}

// redisCPU is the CPU time Redis has used (INFO cpu: used_cpu_user +
// used_cpu_sys).
func redisCPU(tb testing.TB, rdb *redis.Client) time.Duration {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		tb.Fatalf("INFO cpu: %v", err)
	}
	var total float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_user" || k == "used_cpu_sys") {
			f, _ := strconv.ParseFloat(v, 64)
			total += f
		}
	}
	return time.Duration(total * float64(time.Second))
}

// streamBefore reports whether stream id a ("ms-n") is before b.
func streamBefore(a, b string) bool {
	am, an, _ := strings.Cut(a, "-")
	bm, bn, _ := strings.Cut(b, "-")
	x, _ := strconv.ParseInt(am, 10, 64)
	y, _ := strconv.ParseInt(bm, 10, 64)
	if x != y {
		return x < y
	}
	p, _ := strconv.ParseInt(an, 10, 64)
	q, _ := strconv.ParseInt(bn, 10, 64)
	return p < q
}
