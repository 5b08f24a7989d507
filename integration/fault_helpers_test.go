package integration

// Helpers of the fault tests (fault_*_test.go, isolation_test.go): a
// private redis-server a test may pause, kill and restart without touching
// the shared test Redis; a steady load of signed webhooks and agent pushes
// that records every attempt (when it started, how long it took, what it
// got) and retries what was not acknowledged under the same id; and the
// checks every fault test ends with (every acknowledged request journaled
// once, routed once, nothing set aside as poison or dead-lettered).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/ingest"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/workers/route"
)

// ---- a private redis-server ------------------------------------------------

// privateRedis is a redis-server of one test, with AOF on, on a loopback
// port of its own and a data directory that outlives its restarts.
type privateRedis struct {
	t     testing.TB
	bin   string
	port  string
	dir   string
	fsync string   // appendfsync: everysec or always
	args  []string // more arguments (a replica's --replicaof)

	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
	runs int
}

// startPrivateRedis starts a redis-server with appendonly yes and the
// given appendfsync, and waits until it answers. It is killed when the test
// ends, after the test's wakegate processes (registered later) stopped.
func startPrivateRedis(t testing.TB, fsync string, args ...string) *privateRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("the fault tests start their own redis-server: %v", err)
	}
	r := &privateRedis{t: t, bin: bin, dir: t.TempDir(), fsync: fsync, args: args}
	t.Cleanup(func() {
		r.signal(syscall.SIGCONT) // a paused server would not die of SIGTERM
		r.signal(syscall.SIGKILL)
		r.wait(10 * time.Second)
		if t.Failed() {
			log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
			t.Logf("redis-server log:\n%s", tailLines(string(log), 30))
		}
	})
	for attempt := 1; ; attempt++ {
		r.port = strconv.Itoa(freePrivatePort(t))
		r.spawn()
		if err := r.waitUp(15 * time.Second); err == nil {
			return r
		} else if attempt == 3 {
			t.Fatalf("redis-server on port %s: %v", r.port, err)
		}
		r.signal(syscall.SIGKILL)
		r.wait(10 * time.Second)
	}
}

// freePrivatePort picks a free loopback port below the ephemeral range
// (32768–60999 on Linux), so that no outgoing connection takes it while the
// server is down between a kill and its restart.
func freePrivatePort(t testing.TB) int {
	t.Helper()
	for range 100 {
		port := 20000 + rand.IntN(12000)
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			_ = ln.Close()
			return port
		}
	}
	t.Fatal("no free port in 20000–32000")
	return 0
}

func (r *privateRedis) Addr() string { return "127.0.0.1:" + r.port }
func (r *privateRedis) URL() string  { return "redis://" + r.Addr() + "/0" }

func (r *privateRedis) spawn() {
	r.t.Helper()
	cmd := exec.Command(r.bin, "--port", r.port, "--bind", "127.0.0.1", "--dir", r.dir,
		"--appendonly", "yes", "--appendfsync", r.fsync, "--save", "",
		"--aof-use-rdb-preamble", "yes", "--aof-load-truncated", "yes",
		"--logfile", filepath.Join(r.dir, "redis.log"))
	cmd.Args = append(cmd.Args, r.args...)
	if err := cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	r.mu.Lock()
	r.cmd, r.done = cmd, done
	r.runs++
	r.mu.Unlock()
}

// waitUp polls PING until the server answers PONG (not LOADING): its AOF
// is loaded and it takes commands.
func (r *privateRedis) waitUp(timeout time.Duration) error {
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), DialTimeout: 500 * time.Millisecond,
		ReadTimeout: 500 * time.Millisecond, MaxRetries: -1})
	defer rdb.Close()
	deadline := time.Now().Add(timeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := rdb.Ping(ctx).Err()
		cancel()
		if err == nil {
			return nil
		}
		r.mu.Lock()
		done := r.done
		r.mu.Unlock()
		select {
		case <-done:
			return fmt.Errorf("redis-server exited: %v", err)
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PONG after %s: %v", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *privateRedis) signal(sig syscall.Signal) {
	r.mu.Lock()
	cmd := r.cmd
	r.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

func (r *privateRedis) wait(timeout time.Duration) bool {
	r.mu.Lock()
	done := r.done
	r.mu.Unlock()
	if done == nil {
		return true
	}
	select {
	case <-done:
		return true
	case <-time.After(timeout):
		return false
	}
}

// pause stops the server (SIGSTOP): it holds its connections and answers
// nothing — a hang.
func (r *privateRedis) pause() { r.signal(syscall.SIGSTOP) }

// resume continues a paused server (SIGCONT).
func (r *privateRedis) resume() { r.signal(syscall.SIGCONT) }

// kill SIGKILLs the server (paused or not) and waits until it is gone.
func (r *privateRedis) kill() {
	r.t.Helper()
	r.signal(syscall.SIGKILL)
	if !r.wait(10 * time.Second) {
		r.t.Fatal("redis-server still running 10s after SIGKILL")
	}
}

// restart starts the server again on the same port and data directory
// (it loads its AOF) and waits until it takes commands; it returns when
// the process was started.
func (r *privateRedis) restart() time.Time {
	r.t.Helper()
	started := time.Now()
	r.spawn()
	if err := r.waitUp(20 * time.Second); err != nil {
		log, _ := os.ReadFile(filepath.Join(r.dir, "redis.log"))
		r.t.Fatalf("restarted redis-server: %v\n%s", err, tailLines(string(log), 30))
	}
	return started
}

// info reads one field of an INFO section through rdb.
func (r *privateRedis) info(rdb *redis.Client, section, field string) string {
	s, err := rdb.Info(bg(), section).Result()
	if err != nil {
		return "?"
	}
	for _, line := range strings.Split(s, "\r\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			return v
		}
	}
	return "?"
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// newFaultStack prepares wakegate processes on a private Redis, under a
// fresh prefix. The test's own client has short timeouts: it is used only
// while Redis is up.
func newFaultStack(t *testing.T, r *privateRedis, extra map[string]string) *stack {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{Addr: r.Addr(), DialTimeout: time.Second,
		ReadTimeout: 5 * time.Second, WriteTimeout: 5 * time.Second, PoolSize: 16})
	t.Cleanup(func() { _ = rdb.Close() })
	prefix := redistest.Prefix()
	s := &stack{t: t, rdb: rdb, prefix: prefix, hookSecret: "hook-secret-" + prefix, jwtSecret: []byte("jwt-secret-0123456789abcdef-" + prefix)}
	s.env = map[string]string{
		"WAKEGATE_REDIS_URL":              r.URL(),
		"WAKEGATE_REDIS_PREFIX":           prefix,
		"WAKEGATE_GITHUB_WEBHOOK_SECRETS": s.hookSecret,
		"WAKEGATE_JWT_HS256_SECRET":       string(s.jwtSecret),
		"WAKEGATE_INGEST_LIMITS":          "workspace=1000000/s,token=1000000/s",
		"WAKEGATE_LOG_LEVEL":              "info",
		"WAKEGATE_READY_SETTLE":           "1h", // no ready events: opened is what a delivery yields
	}
	for k, v := range extra {
		s.env[k] = v
	}
	return s
}

// ---- a steady load that records every attempt ------------------------------

const (
	kindPush    = "push"
	kindWebhook = "webhook"
)

// try is one HTTP attempt of the load.
type try struct {
	kind   string
	id     string // event id (push) or delivery GUID (webhook)
	start  time.Time
	took   time.Duration
	status int // 0: transport error (err)
	err    string
	// problem: a problem+json answer with Retry-After (what a 503 must be)
	problem bool
}

func (t try) end() time.Time { return t.start.Add(t.took) }

// ack is what a 2xx acknowledged.
type ack struct {
	kind string
	at   time.Time // when the 2xx came
	dup  bool      // acknowledged as a duplicate (an earlier attempt had committed it)
}

// faultLoad sends signed pull_request.opened deliveries (the fixture, each
// its own PR number under a fresh GUID) and agent pushes (an idle
// session.turn_ended, each about its own session, so each is its own inbox
// entry and wake of the controller) from a few clients, each pausing
// between requests. An attempt answered anything but 2xx, or cut by a
// transport error, is retried under the same id — as GitHub redelivers a
// GUID and a harness retries an event id — so once the load stops every id
// it started has been acknowledged, unless the service never came back.
type faultLoad struct {
	s       *stack
	tag     string
	pause   time.Duration
	target  atomic.Pointer[client]
	tmpl    []byte // the opened fixture with placeholder numbers
	feeder  string // token: events:push events:push:any
	stopped chan struct{}
	wg      sync.WaitGroup
	seq     atomic.Int64

	mu       sync.Mutex
	tries    []try
	acked    map[string]ack
	failures []string
}

// Placeholders in the webhook template, replaced per delivery.
const (
	phNumber = "987654321"
	phPRID   = "876543219876"
)

// retryBudget bounds how long one id is retried before the load gives up
// on it (a failure: the service did not come back).
const retryBudget = 45 * time.Second

// newFaultLoad prepares a load against c; tag prefixes its ids.
func newFaultLoad(t testing.TB, s *stack, c *client, tag string, pause time.Duration) *faultLoad {
	t.Helper()
	l := &faultLoad{s: s, tag: tag, pause: pause, stopped: make(chan struct{}), acked: map[string]ack{}}
	l.target.Store(c)
	l.tmpl = editJSON(t, fixture(t, "octokit/pull_request/opened.payload.json"), func(m map[string]any) {
		m["number"] = jsonNumber(phNumber)
		pr := obj(m, "pull_request")
		pr["number"], pr["id"] = jsonNumber(phNumber), jsonNumber(phPRID)
	})
	if bytes.Count(l.tmpl, []byte(phNumber)) != 2 || bytes.Count(l.tmpl, []byte(phPRID)) != 1 {
		t.Fatalf("webhook template: placeholders not found once each")
	}
	l.feeder = s.token(t, "human:feeder-"+tag, "default", "events:push events:push:any")
	return l
}

// jsonNumber is a number editJSON encodes as is.
type jsonNumber string

func (n jsonNumber) MarshalJSON() ([]byte, error) { return []byte(n), nil }

// start runs pushers and webhookers clients until stop.
func (l *faultLoad) start(pushers, webhookers int) {
	for range pushers {
		l.wg.Add(1)
		go func() { defer l.wg.Done(); l.run(kindPush) }()
	}
	for range webhookers {
		l.wg.Add(1)
		go func() { defer l.wg.Done(); l.run(kindWebhook) }()
	}
}

// stop ends the load: each client finishes the id it is on (retrying it
// until acknowledged) and returns.
func (l *faultLoad) stop() {
	close(l.stopped)
	l.wg.Wait()
}

func (l *faultLoad) fail(format string, args ...any) {
	l.mu.Lock()
	l.failures = append(l.failures, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *faultLoad) run(kind string) {
	for {
		select {
		case <-l.stopped:
			return
		default:
		}
		n := l.seq.Add(1)
		var id string
		var send func(c *client) (*response, error)
		if kind == kindPush {
			id = fmt.Sprintf("%s-%06d", l.tag, n)
			body := idleTurn(id, map[string]any{"subject": "session:" + id})
			send = func(c *client) (*response, error) { return c.push(l.feeder, ctEvent, body) }
		} else {
			id = newGUID()
			num := strconv.FormatInt(100000+n, 10)
			body := bytes.ReplaceAll(l.tmpl, []byte(phNumber), []byte(num))
			body = bytes.Replace(body, []byte(phPRID), []byte(strconv.FormatInt(500000000+n, 10)), 1)
			send = func(c *client) (*response, error) { return c.webhook("pull_request", id, body) }
		}
		if !l.deliver(kind, id, send) {
			return
		}
		select {
		case <-l.stopped:
			return
		case <-time.After(l.pause):
		}
	}
}

// deliver sends one id until a 2xx; false when it gave up.
func (l *faultLoad) deliver(kind, id string, send func(c *client) (*response, error)) bool {
	first := time.Now()
	for {
		start := time.Now()
		r, err := send(l.target.Load())
		tr := try{kind: kind, id: id, start: start, took: time.Since(start)}
		if err != nil {
			tr.err = err.Error()
		} else {
			tr.status = r.Status
			tr.problem = strings.HasPrefix(r.Header.Get("Content-Type"), "application/problem+json") && r.Header.Get("Retry-After") != ""
		}
		l.mu.Lock()
		l.tries = append(l.tries, tr)
		l.mu.Unlock()
		if err == nil && r.Status/100 == 2 {
			if a, ok := l.acknowledges(kind, id, r); ok {
				l.mu.Lock()
				l.acked[id] = ack{kind: kind, at: time.Now(), dup: a}
				l.mu.Unlock()
				return true
			}
			l.fail("%s %s: a 2xx that does not acknowledge it: %s", kind, id, r)
			return false
		}
		if err == nil && r.Status != http.StatusServiceUnavailable {
			l.fail("%s %s: %s (only 503 and transport errors are expected)", kind, id, r)
		}
		if time.Since(first) > retryBudget {
			l.fail("%s %s: no 2xx within %s (last: %v %v)", kind, id, retryBudget, r, err)
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// acknowledges checks a 2xx names the id; dup when it says duplicate.
func (l *faultLoad) acknowledges(kind, id string, r *response) (dup, ok bool) {
	if kind == kindPush {
		var a pushAnswer
		if json.Unmarshal(r.Body, &a) != nil {
			return false, false
		}
		switch {
		case r.Status == 202 && len(a.Accepted) == 1 && a.Accepted[0].ID == id && a.Accepted[0].Seq != "":
			return false, true
		case r.Status == 200 && len(a.Duplicates) == 1 && a.Duplicates[0] == id:
			return true, true
		}
		return false, false
	}
	var a deliveryAnswer
	if json.Unmarshal(r.Body, &a) != nil || a.Delivery != id {
		return false, false
	}
	switch {
	case r.Status == 202 && a.Status == "accepted":
		return false, true
	case r.Status == 200 && a.Duplicate:
		return true, true
	}
	return false, false
}

// snapshot returns the attempts and acknowledgements so far.
func (l *faultLoad) snapshot() ([]try, map[string]ack) {
	l.mu.Lock()
	defer l.mu.Unlock()
	acked := make(map[string]ack, len(l.acked))
	for k, v := range l.acked {
		acked[k] = v
	}
	return slices.Clone(l.tries), acked
}

// ackedSince counts the ids of kind acknowledged at or after t.
func (l *faultLoad) ackedSince(kind string, t time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, a := range l.acked {
		if a.kind == kind && !a.at.Before(t) {
			n++
		}
	}
	return n
}

// waitAcked waits until n more ids of each kind have been acknowledged
// after t: the service takes requests.
func (l *faultLoad) waitAcked(t testing.TB, since time.Time, n int, timeout time.Duration, what string) {
	t.Helper()
	waitFor(t, timeout, what, func() (bool, string) {
		p, w := l.ackedSince(kindPush, since), l.ackedSince(kindWebhook, since)
		return p >= n && w >= n, fmt.Sprintf("%d pushes and %d deliveries acknowledged since", p, w)
	})
}

// ---- what the fault tests check afterwards ---------------------------------

// faultChecks are the checks after a fault: which routing to expect.
type faultChecks struct {
	controller string   // every acknowledged push reaches it exactly once ("" to skip)
	watcher    string   // every acknowledged delivery's opened event reaches it exactly once ("" to skip)
	pushes     *pushLog // every acknowledged push was pushed to the controller under one webhook-id (nil to skip)
	ws         string
}

// checkCommitted waits for the workers to catch up (every committed
// delivery derived, every journal shard routed to its end), then checks
// that every acknowledged id is in the journal exactly once (a delivery as
// its github.pull_request.opened event), that no id of the load is there
// twice, that nothing was set aside as poison by derive or routing, that
// no push was dead-lettered, and the routing fc asks for. It returns the
// journal's count per id.
func checkCommitted(t *testing.T, s *stack, l *faultLoad, fc faultChecks) map[string]int {
	t.Helper()
	_, acked := l.snapshot()
	if len(acked) == 0 {
		t.Fatal("the load had nothing acknowledged")
	}
	if fc.controller != "" || fc.watcher != "" {
		s.routed(t, true)
	} else {
		s.waitDerived(t, 40*time.Second)
	}
	evs := s.journalEvents(t)
	count := countIDs(evs)
	typeOf := map[string]string{}
	for _, e := range evs {
		typeOf[e.ID] = e.Type
	}
	lost := 0
	for id, a := range acked {
		switch {
		case count[id] == 0:
			lost++
			if lost <= 10 {
				t.Errorf("acknowledged %s %s (at %s) is not in the journal", a.kind, id, a.at.Format("15:04:05.000"))
			}
		case count[id] > 1:
			t.Errorf("acknowledged %s %s is in the journal %d times", a.kind, id, count[id])
		case a.kind == kindWebhook && typeOf[id] != "github.pull_request.opened":
			t.Errorf("delivery %s journaled as %s, want github.pull_request.opened", id, typeOf[id])
		}
	}
	if lost > 10 {
		t.Errorf("… %d acknowledged requests in all are not in the journal", lost)
	}
	for id, n := range count {
		if n > 1 {
			t.Errorf("%s is in the journal %d times", id, n)
		}
	}
	checkNoPoison(t, s)

	if fc.controller != "" || fc.watcher != "" {
		ledger := ledgerByID(t, s)
		for id, a := range acked {
			want := fc.controller
			if a.kind == kindWebhook {
				want = fc.watcher
			}
			if want == "" {
				continue
			}
			rec := ledger[id]
			if len(rec) != 1 || len(rec[want]) != 1 {
				t.Errorf("acknowledged %s %s reached %v in the delivery ledger, want %s exactly once (one inbox seq)", a.kind, id, rec, want)
			}
		}
	}
	if fc.pushes != nil {
		checkPushed(t, s, l, fc)
	}
	return count
}

// checkNoPoison: no derive poison, no routing poison, no dead letter.
func checkNoPoison(t *testing.T, s *stack) {
	t.Helper()
	store := ingest.New(s.rdb, s.journalLayout())
	j := s.journalLayout()
	for sh := range shards {
		if msgs, _ := s.rdb.XRange(bg(), store.Tag(sh)+":poison", "-", "+").Result(); len(msgs) > 0 {
			t.Errorf("derive set %d deliveries of ingest shard %d aside as poison, e.g. %v", len(msgs), sh, msgs[0].Values)
		}
		if msgs, _ := s.rdb.XRange(bg(), j.Tag(sh)+":route:poison", "-", "+").Result(); len(msgs) > 0 {
			t.Errorf("routing set %d events of journal shard %d aside as poison, e.g. %v", len(msgs), sh, msgs[0].Values)
		}
	}
	dead := s.prefix + ":{" + s.prefix + ":push:dead}:h"
	if n, _ := s.rdb.HLen(bg(), dead).Result(); n > 0 {
		t.Errorf("%d pushes were dead-lettered", n)
	}
}

// ledgerByID reads every shard's delivery ledger: event id → recipient →
// inbox seqs.
func ledgerByID(t testing.TB, s *stack) map[string]map[string]map[string]bool {
	t.Helper()
	j := s.journalLayout()
	out := map[string]map[string]map[string]bool{}
	for sh := range shards {
		msgs, err := s.rdb.XRange(bg(), route.LedgerKey(j, sh), "-", "+").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			id, to := fmt.Sprint(m.Values["id"]), fmt.Sprint(m.Values["to"])
			if out[id] == nil {
				out[id] = map[string]map[string]bool{}
			}
			if out[id][to] == nil {
				out[id][to] = map[string]bool{}
			}
			out[id][to][fmt.Sprint(m.Values["inbox_seq"])] = true
		}
	}
	return out
}

// checkPushed waits until every acknowledged push has been pushed to the
// controller's endpoint, then checks each under exactly one webhook-id (the
// one its inbox seq derives), with a body that never changed and a
// signature that verifies.
//
// After Redis hung, Asynq may hold a few pushes as active with no worker:
// a dequeue script the worker gave up on (i/o timeout) stays in the hung
// server's socket and runs when it continues, moving a task to active for
// a worker that never learns of it. Asynq's recoverer hands such a task
// back once its lease has been expired 30 s, looking every minute: 60 to
// 150 s after the hang. The test does not wait that long: once every
// missing push is such a task (pending and retry empty, every remaining
// lease unextended for 6 s — a live worker extends its leases every 5 s),
// it moves those leases into the past and starts a second worker, whose
// recoverer runs at once (the shortcut of push_workerkill_test.go). The
// recovery itself is Asynq's own.
func checkPushed(t *testing.T, s *stack, l *faultLoad, fc faultChecks) {
	t.Helper()
	_, acked := l.snapshot()
	missing := func() (int, []pushReq) {
		reqs := fc.pushes.snapshot()
		seen := map[string]bool{}
		for _, q := range reqs {
			seen[q.eventID] = true
		}
		n := 0
		for id, a := range acked {
			if a.kind == kindPush && !seen[id] {
				n++
			}
		}
		return n, reqs
	}
	queue := pushQueueOf(s.prefix, fc.ws, fc.controller) // every push here is to the controller
	leaseKey := "asynq:{" + queue + "}:lease"
	insp := asynq.NewInspectorFromRedisClient(s.rdb)
	type lease struct {
		score float64
		since time.Time
	}
	leases := map[string]lease{}
	var orphans []string
	waitFor(t, 40*time.Second, "every acknowledged push pushed, or left active with no worker", func() (bool, string) {
		n, reqs := missing()
		if n == 0 {
			orphans = nil
			return true, ""
		}
		qi, err := insp.GetQueueInfo(queue)
		if err != nil {
			return false, err.Error()
		}
		zs, err := s.rdb.ZRangeWithScores(bg(), leaseKey, 0, -1).Result()
		if err != nil {
			return false, err.Error()
		}
		now := time.Now()
		orphans = orphans[:0]
		for _, z := range zs {
			id := fmt.Sprint(z.Member)
			if prev, ok := leases[id]; !ok || prev.score != z.Score {
				leases[id] = lease{z.Score, now}
			} else if now.Sub(prev.since) >= 6*time.Second {
				orphans = append(orphans, id)
			}
		}
		done := qi.Pending == 0 && qi.Retry == 0 && len(zs) > 0 && len(orphans) == len(zs) && len(zs) >= n
		return done, fmt.Sprintf("%d acknowledged pushes not pushed yet (%d requests received); %s", n, len(reqs), pushQueueState(s))
	})
	if len(orphans) > 0 {
		past := float64(time.Now().Add(-2 * time.Minute).Unix())
		for _, id := range orphans {
			s.rdb.ZAddXX(bg(), leaseKey, redis.Z{Score: past, Member: id})
		}
		s.start("worker-recoverer", "worker", nil)
		t.Logf("%d pushes were left active with no worker after the outage (%v); a second worker's recoverer gave them back (test-only trigger)", len(orphans), orphans)
	}
	var reqs []pushReq
	waitFor(t, 30*time.Second, "every acknowledged push pushed to the controller", func() (bool, string) {
		var n int
		n, reqs = missing()
		return n == 0, fmt.Sprintf("%d acknowledged pushes not pushed yet (%d requests received); %s", n, len(reqs), pushQueueState(s))
	})
	idsOf := map[string]map[string]bool{}
	bodyOf := map[string]string{}
	repeats := 0
	for _, q := range reqs {
		if q.verifyErr != nil {
			t.Errorf("push %s: signature check failed: %v", q.webhookID, q.verifyErr)
		}
		if want := outbound.WebhookID(s.prefix, fc.ws, fc.controller, q.seq); q.webhookID != want {
			t.Errorf("push of %s at seq %d has webhook-id %s, want %s", q.eventID, q.seq, q.webhookID, want)
		}
		if idsOf[q.eventID] == nil {
			idsOf[q.eventID] = map[string]bool{}
		}
		idsOf[q.eventID][q.webhookID] = true
		if prev, ok := bodyOf[q.webhookID]; ok {
			repeats++
			if prev != q.body {
				t.Errorf("push %s sent again with another body", q.webhookID)
			}
		}
		bodyOf[q.webhookID] = q.body
	}
	for id, ids := range idsOf {
		if len(ids) != 1 {
			t.Errorf("wake %s pushed under %d webhook-ids, want one", id, len(ids))
		}
	}
	t.Logf("pushes: %d requests for %d wakes (%d repeats of a webhook-id)", len(reqs), len(idsOf), repeats)
}

// ---- answer times ----------------------------------------------------------

// durations summarizes answer times.
type durations []time.Duration

func (d durations) pct(p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

func (d durations) String() string {
	if len(d) == 0 {
		return "none"
	}
	return fmt.Sprintf("n=%d p50=%s p99=%s max=%s", len(d),
		d.pct(0.50).Round(time.Millisecond), d.pct(0.99).Round(time.Millisecond), d.pct(1).Round(time.Millisecond))
}

// countKinds counts attempts per kind.
func countKinds(tries []try) map[string]int {
	n := map[string]int{}
	for _, t := range tries {
		n[t.kind]++
	}
	return n
}

// ---- readiness over time ---------------------------------------------------

// readyProbe polls a process's /readyz every 100 ms and records whether it
// answered 200.
type readyProbe struct {
	mu      sync.Mutex
	samples []readySample
	stop    chan struct{}
	done    chan struct{}
}

type readySample struct {
	at time.Time
	ok bool
}

func probeReady(p *proc) *readyProbe {
	rp := &readyProbe{stop: make(chan struct{}), done: make(chan struct{})}
	hc := &http.Client{Timeout: 4 * time.Second}
	go func() {
		defer close(rp.done)
		for {
			at := time.Now()
			ok := false
			if resp, err := hc.Get(p.readyURL()); err == nil {
				ok = resp.StatusCode == http.StatusOK
				resp.Body.Close()
			}
			rp.mu.Lock()
			rp.samples = append(rp.samples, readySample{at, ok})
			rp.mu.Unlock()
			select {
			case <-rp.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return rp
}

// awaitReady waits until a sample at or after t was ready, or timeout
// passes (the check of the samples then says which).
func (rp *readyProbe) awaitReady(t time.Time, timeout time.Duration) {
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); {
		rp.mu.Lock()
		_, ok := firstReady(rp.samples, t)
		rp.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-rp.done:
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// halt stops the probe and returns its samples.
func (rp *readyProbe) halt() []readySample {
	select {
	case <-rp.stop:
	default:
		close(rp.stop)
	}
	<-rp.done
	rp.mu.Lock()
	defer rp.mu.Unlock()
	return slices.Clone(rp.samples)
}

// firstNotReady is the first sample at or after t that was not ready.
func firstNotReady(samples []readySample, t time.Time) (time.Time, bool) {
	for _, s := range samples {
		if !s.at.Before(t) && !s.ok {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// firstReady is the first sample at or after t that was ready.
func firstReady(samples []readySample, t time.Time) (time.Time, bool) {
	for _, s := range samples {
		if !s.at.Before(t) && s.ok {
			return s.at, true
		}
	}
	return time.Time{}, false
}

// pushQueueState describes the push queue, for a failure message.
func pushQueueState(s *stack) string {
	qi, err := pushQueueInfo(asynq.NewInspectorFromRedisClient(s.rdb), s.prefix)
	if err != nil {
		return "push queue: " + err.Error()
	}
	var ls []string
	for _, queue := range pushQueues(s.prefix) {
		leases, _ := s.rdb.ZRangeWithScores(bg(), "asynq:{"+queue+"}:lease", 0, -1).Result()
		for _, z := range leases {
			ls = append(ls, fmt.Sprintf("%v@%s", z.Member, time.Unix(int64(z.Score), 0).Format("15:04:05")))
		}
	}
	return fmt.Sprintf("push queue: pending %d active %d scheduled %d retry %d archived %d; leases %v",
		qi.Pending, qi.Active, qi.Scheduled, qi.Retry, qi.Archived, ls)
}
