package perf

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/delivery/subscriptions"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/integration/bench"
	wgstack "github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/agent"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
	"github.com/wakegate/wakegate/workers/route"
	"github.com/wakegate/wakegate/workers/tasks"
)

const (
	webhookSecret = "perf-webhook-secret"
	tokenSecret   = "perf-token-secret-0123456789abcdef"
	hookID        = "4242"
	shards        = 16 // the default journal.Config.Shards
)

// fixturePath is the signed body of the ingest targets: octokit's
// pull_request/opened, 28 KB.
var fixturePath = filepath.Join("..", "..", "testdata", "github", "octokit", "pull_request", "opened.payload.json")

// payload renders the fixture with a chosen PR number, so that every
// request is a different body (the replay guard refuses a byte-identical
// body under a fresh GUID) and a different PR, while staying the same
// valid 28 KB document.
type payload struct{ head, mid, tail []byte }

func loadPayload(tb testing.TB) *payload {
	tb.Helper()
	return parsePayload(tb, loadFixture(tb))
}

// fixtureRepo is the repository.full_name of the fixture.
const fixtureRepo = "Codertocat/Hello-World"

func loadFixture(tb testing.TB) []byte {
	tb.Helper()
	raw, err := os.ReadFile(fixturePath)
	if err != nil {
		tb.Fatalf("the ingest fixture is required: %v", err)
	}
	return raw
}

// repoPayload is the fixture about repository repo (every full_name and
// URL of the fixture's repository rewritten), still varied by PR number.
func repoPayload(tb testing.TB, raw []byte, repo string) *payload {
	tb.Helper()
	return parsePayload(tb, bytes.ReplaceAll(raw, []byte(fixtureRepo), []byte(repo)))
}

func parsePayload(tb testing.TB, raw []byte) *payload {
	tb.Helper()
	const field = `"number": 2,`
	i := bytes.Index(raw, []byte(field))
	k := -1
	if i >= 0 {
		k = bytes.Index(raw[i+len(field):], []byte(field))
	}
	if k < 0 {
		tb.Fatalf("%s: no top-level and pull_request \"number\" fields to vary", fixturePath)
	}
	j := i + len(field) + k
	p := &payload{
		head: raw[:i+len(`"number": `)],
		mid:  raw[i+len(field)-1 : j+len(`"number": `)],
		tail: raw[j+len(field)-1:],
	}
	if b := p.body(123456789); !json.Valid(b) || !bytes.Contains(b, []byte(`"number": 123456789,`)) {
		tb.Fatal("varied payload is not valid JSON")
	}
	return p
}

// body is the fixture with PR number n (top level and pull_request.number).
func (p *payload) body(n int64) []byte {
	num := strconv.AppendInt(nil, n, 10)
	b := make([]byte, 0, len(p.head)+len(p.mid)+len(p.tail)+2*len(num))
	b = append(append(append(append(append(b, p.head...), num...), p.mid...), num...), p.tail...)
	return b
}

func sign(body []byte) string {
	m := hmac.New(sha256.New, []byte(webhookSecret))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// webhookRequest is a signed delivery of body under a fresh GUID, as
// GitHub sends it.
func webhookRequest(url string, body []byte) *http.Request {
	req, _ := http.NewRequest(http.MethodPost, url+"/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "GitHub-Hookshot/perf")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", uuid.NewString())
	req.Header.Set("X-GitHub-Hook-ID", hookID)
	req.Header.Set("X-Hub-Signature-256", sign(body))
	return req
}

// newClient opens a Redis client as every wakegate process does.
func newClient(tb testing.TB, url string) *redis.Client {
	tb.Helper()
	c, err := wgstack.NewClient(url, shards)
	if err != nil {
		tb.Fatal(err)
	}
	rdb, ok := c.(*redis.Client)
	if !ok {
		tb.Fatalf("perf needs a single-node redis:// URL, got a %T", c)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	if err := rdb.Ping(ctx).Err(); err != nil {
		tb.Fatalf("perf needs real Redis at %s: %v", url, err)
	}
	return rdb
}

// stack is wakegate assembled by package stack (imported as wgstack), as serve assembles
// it, on a fresh key prefix that is deleted at cleanup. Its fields name
// the parts the benchmarks use.
type stack struct {
	st       *wgstack.Stack
	rdb      *redis.Client
	prefix   string
	j        *journal.Journal
	store    *ingest.Store
	tr       *tracker.Tracker
	sessions *sessions.Registry
	subs     *subscriptions.Store
	sup      *supervision.Store
	box      *inbox.Inbox
	push     *tasks.Pusher
	holds    *holds.Store
	release  *tasks.Releaser
	gw       *gateway.Server
	reg      *prometheus.Registry
}

func newStack(tb testing.TB, redisURL string, limits gateway.Limits) *stack {
	tb.Helper()
	rdb := newClient(tb, redisURL)
	prefix := redistest.Prefix()
	tb.Cleanup(func() {
		redistest.Flush(rdb, prefix)
		_ = rdb.Close()
	})
	reg := prometheus.NewRegistry()
	st, err := wgstack.New(rdb, wgstack.Config{Prefix: prefix, Shards: shards}, slog.New(slog.DiscardHandler), reg)
	if err != nil {
		tb.Fatal(err)
	}
	s := &stack{st: st, rdb: rdb, prefix: prefix, j: st.Journal, store: st.Ingest, tr: st.Tracker, sessions: st.Sessions,
		subs: st.Subs, sup: st.Sup, box: st.Inbox, push: st.Push, holds: st.Holds, release: st.Release, reg: reg}
	verifier, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(tokenSecret)})
	if err != nil {
		tb.Fatal(err)
	}
	workspaces, err := github.ParseWorkspaces("*=default", event.ValidWorkspace) // WAKEGATE_WORKSPACES' default
	if err != nil {
		tb.Fatal(err)
	}
	s.gw, err = st.Gateway(gateway.Config{
		Addr: "127.0.0.1:0", WebhookSecrets: [][]byte{[]byte(webhookSecret)}, Workspaces: workspaces, Limits: limits, TokenSecret: []byte(tokenSecret),
	}, verifier, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// startWorkers runs what serve runs beside the gateway
// (wgstack.Stack.Workers). They stop at cleanup, before the keys are
// deleted.
func (s *stack) startWorkers(tb testing.TB) {
	components, _ := s.st.Workers()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range components {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	tb.Cleanup(func() { cancel(); wg.Wait() })
}

// serve runs the gateway as serve does, with gateway.Server.Run: its own
// listener (on a loopback port) and the Pub/Sub notifiers that wake
// long-polls (an httptest server around Handler would leave them out). It
// returns the base URL and stops at cleanup, before the workers.
func (s *stack) serve(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.gw.Run(ctx) }()
	tb.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(5 * time.Second)
	for s.gw.Addr() == "" {
		select {
		case err := <-done:
			tb.Fatalf("gateway: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatal("the gateway did not start listening")
		}
		time.Sleep(5 * time.Millisecond)
	}
	return "http://" + s.gw.Addr()
}

// routeLag is the age of the oldest journal entry the router has not
// routed yet (its per-shard cursor, workers/route), 0 when none.
func routeLag(ctx context.Context, s *stack, now time.Time) (time.Duration, error) {
	lags, err := route.ShardLags(ctx, s.rdb, s.j, now)
	if err != nil {
		return 0, err
	}
	return slices.Max(lags), nil
}

// lag is how far the deriver is behind the committed deliveries.
type lag struct {
	Age     time.Duration // age of the oldest committed record not yet derived; 0 when none
	Backlog int64         // records committed and not yet derived (pending or undelivered)
}

// deriveLag reads the consumer group of every ingest shard.
func deriveLag(ctx context.Context, rdb redis.UniversalClient, store *ingest.Store, now time.Time) (lag, error) {
	age, backlog, err := bench.DeriveLag(ctx, rdb, store, now)
	return lag{Age: age, Backlog: backlog}, err
}

func idMillis(id string) int64 {
	ms, _, _ := strings.Cut(id, "-")
	n, _ := strconv.ParseInt(ms, 10, 64)
	return n
}

// newBaseline is the bare handler the ingest targets are measured
// against (read the body, verify its HMAC, one XADD — nothing else), the
// one wakegate bench serves, on a fresh prefix.
func newBaseline(tb testing.TB, redisURL string) *bench.Baseline {
	rdb := newClient(tb, redisURL)
	prefix := redistest.Prefix()
	tb.Cleanup(func() {
		redistest.Flush(rdb, prefix)
		_ = rdb.Close()
	})
	return bench.NewBaseline(rdb, prefix+":baseline", []byte(webhookSecret))
}

// httpClient keeps up to conns connections alive to one host.
func httpClient(conns int) *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: 90 * time.Second, DisableCompression: true,
	}}
}

// send does req and drains the answer so the connection is reused; any
// status but 200/202 is an error.
func send(c *http.Client, req *http.Request) error {
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	b, _ := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: %d %s", req.Method, req.URL.Path, resp.StatusCode, bytes.TrimSpace(b))
	}
	if bytes.Contains(b, []byte(`"duplicate":true`)) || bytes.Contains(b, []byte(`"duplicates":["`)) {
		return errors.New("answered duplicate: the load did not vary its input")
	}
	return nil
}

// closedLoop runs b.N calls of do on exactly conns goroutines and returns
// the throughput; it fails the benchmark on the first error.
func closedLoop(b *testing.B, conns int, do func(i int64) error) (perSec float64) {
	var next, failed atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	var perSecond [3600]atomic.Int64 // completions by second of the run
	load := loadAvg()
	cpu0 := cpuTime()
	b.ResetTimer()
	start := time.Now()
	for range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := do(i); err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, err)
				}
				perSecond[min(int(time.Since(start)/time.Second), len(perSecond)-1)].Add(1)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	// CPU time of the whole process (client, server, workers) per request:
	// far less sensitive to noisy neighbours than throughput.
	b.ReportMetric(float64((cpuTime()-cpu0)/time.Microsecond)/float64(b.N), "cpu_us/op")
	lastCPUPerOp = float64(cpuTime()-cpu0) / float64(b.N)
	if n := failed.Load(); n > 0 {
		b.Fatalf("%d of %d requests failed; first: %v", n, b.N, first.Load())
	}
	if secs := int(b.Elapsed() / time.Second); secs >= 20 {
		// Throughput by tenth of the run: a trend (degradation) or a dip
		// (a noisy neighbour) shows here.
		var windows []string
		for w := range 10 {
			var n int64
			lo, hi := secs*w/10, secs*(w+1)/10
			for s := lo; s < hi; s++ {
				n += perSecond[s].Load()
			}
			windows = append(windows, strconv.FormatInt(n/int64(max(1, hi-lo)), 10))
		}
		b.Logf("%d conns, %d requests in %s; per second by tenth of the run: %s; load average before %s, after %s",
			conns, b.N, b.Elapsed().Round(time.Millisecond), strings.Join(windows, " "), load, loadAvg())
	}
	return float64(b.N) / b.Elapsed().Seconds()
}

// lastCPUPerOp is the CPU time per request of the last closedLoop (ns).
var lastCPUPerOp float64

// cpuTime is the user+system CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loadAvg is the 1-minute load average (the machine is shared).
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return "?"
	}
	return f[0]
}

// sameRun holds figures measured earlier in this process, for ratios.
var sameRun struct {
	sync.Mutex
	baselineOpsPerSec float64
	baselineCPUPerOp  float64
}

func setBaseline(v float64) {
	sameRun.Lock()
	sameRun.baselineOpsPerSec, sameRun.baselineCPUPerOp = v, lastCPUPerOp
	sameRun.Unlock()
}

// reportRatios reports perSec ÷ the baseline's ops/s as "ratio", and the
// baseline's CPU per request ÷ this run's as "cpu_ratio": the throughput
// ratio a quiet CPU-bound machine would show.
func reportRatios(b *testing.B, perSec float64) {
	sameRun.Lock()
	base, baseCPU := sameRun.baselineOpsPerSec, sameRun.baselineCPUPerOp
	sameRun.Unlock()
	if base > 0 {
		b.ReportMetric(perSec/base, "ratio")
	}
	if baseCPU > 0 && lastCPUPerOp > 0 {
		b.ReportMetric(baseCPU/lastCPUPerOp, "cpu_ratio")
	}
}

func jwtDate(t time.Time) *jwt.NumericDate { return jwt.NewNumericDate(t) }

// counter sums a counter family of the stack's registry over the series
// whose labels include label=value ("" = all series).
func (s *stack) counter(name, label, value string) float64 {
	mfs, err := s.reg.Gather()
	if err != nil {
		return 0
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			ok := label == ""
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					ok = true
				}
			}
			if ok && m.GetCounter() != nil {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}
