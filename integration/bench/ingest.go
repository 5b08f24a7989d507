package bench

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/keyspace"
)

func init() {
	scenarios["ingest"] = &scenario{
		about:    "signed 28 KB pull_request.opened webhooks only (each PR ready 1 s later: WAKEGATE_READY_SETTLE=1s): throughput (closed loop) against the bare handler, derive lag, latency at --rate (open loop), Redis memory per delivery",
		defaults: Options{Duration: 60 * time.Second, Warmup: 3 * time.Second, Rate: 1000, Conns: 32},
		run:      runIngest,
	}
}

// hooks sends signed pull_request.opened deliveries, PR number off+i,
// round robin over urls, and counts the accepted ones.
func hooks(c *http.Client, urls []string, off int64, accepted *atomic.Int64) func(context.Context, int64) error {
	tpl := newPRTemplate(fixtureRepo)
	return func(ctx context.Context, i int64) error {
		req, _ := webhook(ctx, urls[int(i)%len(urls)], "pull_request", tpl.body(off+i))
		_, err := send(c, req)
		if err == nil && accepted != nil {
			accepted.Add(1)
		}
		return err
	}
}

func runIngest(ctx context.Context, r *runner) error {
	// Every PR opened here has no CI, so it settles into ready after
	// WAKEGATE_READY_SETTLE. At the default 60 s, the PRs of one phase
	// all came due during the next one: a burst of another phase's work
	// in the middle of a measurement. At 1 s each phase carries the
	// settling of its own deliveries, at its own rate: the steady state.
	sys, err := r.start(ctx, "WAKEGATE_READY_SETTLE=1s")
	if err != nil {
		return err
	}
	defer sys.Stop()
	c := newHTTPClient(max(r.o.Conns, 256))
	defer c.CloseIdleConnections()
	o := r.o
	closed := func(name string) Loop {
		return Loop{Name: name, Conns: o.Conns, Duration: o.Duration, Warmup: o.Warmup}
	}
	open := func(name string) Loop {
		return Loop{Name: name, Rate: o.Rate, Conns: max(o.Conns, 256), Duration: o.Duration, Warmup: o.Warmup}
	}

	// Throughput: the bare handler, then the gateways, each as fast as
	// o.Conns connections go.
	bl, err := r.baseline(ctx, sys, closed("baseline, closed loop"))
	if err != nil {
		return err
	}

	mem0, _ := sys.UsedMemory(ctx)
	var accepted atomic.Int64
	l := closed("ingest, closed loop")
	l.Do = hooks(c, sys.Gateways, 0, &accepted)
	gw := r.measure(ctx, sys, l, false)
	ended := time.Now()
	lag, err := sys.Lag(ctx) // at the end of the run: has derivation kept up?
	if err != nil {
		return fmt.Errorf("read the lag: %w", err)
	}
	if _, err := sys.WaitCaughtUp(ctx, 2*time.Minute); err != nil {
		return err
	}
	// Sustained: the loop's deliveries counted until every one is derived,
	// settled into ready (WAKEGATE_READY_SETTLE, 1 s, after its head
	// appeared) and routed.
	derived, err := sys.WaitDerived(ctx, 2*time.Minute)
	if err != nil {
		return fmt.Errorf("settle the closed loop's deliveries: %w", err)
	}
	var sustained float64
	if derived && gw.Elapsed > 0 {
		sustained = float64(gw.N) / (gw.Elapsed + time.Since(ended)).Seconds()
	}
	mem1, _ := sys.UsedMemory(ctx)
	if n := accepted.Load(); n > 0 {
		if split, err := sys.MemorySplit(ctx); err == nil {
			r.note("Redis memory per retained delivery, by key category: %s", formatSplit(split, n))
		}
	}

	// Latency at a fixed rate, open loop.
	blOpen, err := r.baseline(ctx, sys, open("baseline, open loop"))
	if err != nil {
		return err
	}
	l = open("ingest, open loop")
	l.Do = hooks(c, sys.Gateways, 1<<40, nil)
	gwOpen := r.measure(ctx, sys, l, false)
	openLag, err := sys.WaitCaughtUp(ctx, 10*time.Second)
	if err != nil {
		return err
	}
	// Last, so the backlog it leaves in Redis (and a larger AOF to
	// rewrite) weighs on no other phase.
	l = closed("ingest, workers paused")
	l.Duration = min(l.Duration, 20*time.Second)
	split, err := splitIngest(ctx, r, sys, c, l)
	if err != nil {
		return err
	}

	rep := r.rep
	ratio := gw.Achieved / bl.Achieved
	rep.row(fmt.Sprintf("ingest of signed 28 KB pull_request.opened, %d conns closed loop, workers deriving on the same cores: ≥ 55 %% of the bare handler's throughput", o.Conns),
		gw.Achieved, "ops/s", bl.Achieved, ratio, verdict(ratio >= 0.55 && errorCount(gw) == 0))
	if sustained > 0 {
		rep.row("ingest sustained: that loop's deliveries per second counted until every one is derived, settled into ready and routed: ≥ 45 % of the bare handler's throughput",
			sustained, "ops/s", bl.Achieved, sustained/bl.Achieved, verdict(sustained/bl.Achieved >= 0.45 && errorCount(gw) == 0))
	} else {
		r.note("the closed loop's deliveries were not all derived, settled and routed within 2 minutes: no sustained rate")
	}
	if gw.CPUPerOp > 0 && bl.CPUPerOp > 0 {
		rep.row("ingest CPU per delivery (wakegate processes + Redis; ratio = baseline ÷ ingest)", float64(gw.CPUPerOp)/1e3, "µs", float64(bl.CPUPerOp)/1e3,
			float64(bl.CPUPerOp)/float64(gw.CPUPerOp), nil)
	}
	rep.row(fmt.Sprintf("derive lag at the end of the %s throughput run < 1 s (backlog %d)", o.Duration, lag.Backlog),
		lag.Derive.Seconds(), "s", 0, 0, verdict(lag.Derive < time.Second))
	rep.row(fmt.Sprintf("ingest p99 < 20 ms at %.0f/s open loop", o.Rate), msf(gwOpen.Latency.P99), "ms", msf(blOpen.Latency.P99),
		float64(gwOpen.Latency.P99)/float64(max(blOpen.Latency.P99, 1)), verdict(gwOpen.Latency.P99 < 20*time.Millisecond && errorCount(gwOpen) == 0))
	rep.row(fmt.Sprintf("ingest with the workers paused (SIGSTOP), %d conns closed loop, %s: the gateway path alone ≥ 85 %% of the bare handler's throughput", o.Conns, split.gateway.Elapsed.Round(time.Second)),
		split.gateway.Achieved, "ops/s", bl.Achieved, split.gateway.Achieved/bl.Achieved, verdict(split.gateway.Achieved/bl.Achieved >= 0.85 && errorCount(split.gateway) == 0))
	if split.gateway.CPUPerOp > 0 && bl.CPUPerOp > 0 {
		rep.row("CPU per delivery of the gateway path (gateway + Redis, workers paused; ratio = baseline ÷ it)", float64(split.gateway.CPUPerOp)/1e3, "µs",
			float64(bl.CPUPerOp)/1e3, float64(bl.CPUPerOp)/float64(split.gateway.CPUPerOp), nil)
	}
	if split.derive > 0 {
		rep.row("CPU per delivery of derivation (worker + Redis deriving, settling and routing that backlog once resumed, in full batches): ≤ 120 µs", float64(split.derive)/1e3, "µs",
			float64(bl.CPUPerOp)/1e3, float64(bl.CPUPerOp)/float64(split.derive), verdict(split.derive <= 120*time.Microsecond))
		rep.row(fmt.Sprintf("backlog of %d deliveries derived and routed after the pause", split.gateway.N), split.drainRate, "deliveries/s", 0, 0, nil)
	}
	if n := accepted.Load(); n > 0 && mem1 > mem0 {
		rep.row(fmt.Sprintf("Redis memory per retained delivery (raw, markers, ingest record, journal entry, PR state; %d deliveries)", n),
			float64(mem1-mem0)/float64(n), "B", 0, 0, nil)
	}
	if openLag.Backlog > 0 || openLag.Route > time.Second {
		r.note("after the open-loop phase the workers were still behind: derive backlog %d, route lag %s", openLag.Backlog, openLag.Route)
	}
	return nil
}

func msf(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// ingestSplit is the ingest closed loop taken apart: the gateway path on
// its own, then derivation on its own.
type ingestSplit struct {
	gateway   Result        // the closed loop with the workers paused
	derive    time.Duration // worker and Redis CPU per delivery of that backlog
	drainRate float64       // deliveries of that backlog derived and routed per second
}

// splitIngest runs l with the workers paused (SIGSTOP), so the gateway
// commits and nothing derives; then resumes them and measures the CPU of
// deriving, settling and routing what was committed. The sum of the two is
// what one delivery costs when both run at once (the ingest closed loop),
// except that a backlog is derived in full batches.
func splitIngest(ctx context.Context, r *runner, sys *System, c *http.Client, l Loop) (ingestSplit, error) {
	var out ingestSplit
	if err := sys.SignalRole("worker", syscall.SIGSTOP); err != nil {
		return out, err
	}
	defer sys.SignalRole("worker", syscall.SIGCONT) // never leave them paused; a second SIGCONT is harmless
	var accepted atomic.Int64
	l.Do = hooks(c, sys.Gateways, 1<<41, &accepted)
	out.gateway = r.measure(ctx, sys, l, false)
	n := accepted.Load()

	cpu := func() (workers, redis time.Duration) {
		w, rd := sys.CPU(ctx)
		return w - sys.RoleCPU("gateway"), rd
	}
	w0, rd0 := cpu()
	cs0, _ := commandStats(ctx, sys.Redis)
	slow := startSlowLog(ctx, r, sys, 1000000) // every command of the phase
	start := time.Now()
	if err := sys.SignalRole("worker", syscall.SIGCONT); err != nil {
		return out, err
	}
	lag, err := sys.WaitCaughtUp(ctx, 5*time.Minute)
	if err != nil {
		return out, fmt.Errorf("derive the paused backlog: %w", err)
	}
	drained := time.Since(start)
	done, err := sys.WaitDerived(ctx, 30*time.Second)
	if err != nil {
		return out, fmt.Errorf("settle the paused backlog: %w", err)
	}
	if lag.Backlog > 0 || !done {
		r.note("the paused phase's backlog was not derived, settled and routed in time (derive backlog %d): its CPU is not reported", lag.Backlog)
		return out, nil
	}
	if n > 0 && sys.Private {
		w1, rd1 := cpu()
		workers, redis := (w1-w0)/time.Duration(n), (rd1-rd0)/time.Duration(n)
		out.derive = workers + redis
		r.note("derivation of the paused backlog, CPU per delivery: workers %s, Redis %s",
			workers.Round(time.Microsecond), redis.Round(time.Microsecond))
		out.drainRate = float64(n) / drained.Seconds()
		if cs1, err := commandStats(ctx, sys.Redis); err == nil && cs0 != nil {
			r.note("derivation of the paused backlog, Redis commands per delivery (INFO commandstats: µs, calls; a script's commands count in it and on their own): %s",
				commandSplit(cs0, cs1, n))
		}
		if slow {
			r.note("derivation of the paused backlog, scripts per delivery (SLOWLOG): %s", scriptSplit(ctx, sys.Redis, n))
		}
	}
	return out, nil
}

// startSlowLog has the run's own redis-server log every command in its
// slow log (the last n of them) when WAKEGATE_BENCH_SLOWLOG is set, to
// split Redis's time by script; false when it is not set or failed.
func startSlowLog(ctx context.Context, r *runner, sys *System, n int) bool {
	if os.Getenv("WAKEGATE_BENCH_SLOWLOG") == "" || !sys.Private || sys.Cluster {
		return false
	}
	p := sys.Redis.Pipeline()
	p.ConfigSet(ctx, "slowlog-max-len", strconv.Itoa(n))
	p.ConfigSet(ctx, "slowlog-log-slower-than", "0")
	p.SlowLogReset(ctx)
	if _, err := p.Exec(ctx); err != nil {
		r.note("WAKEGATE_BENCH_SLOWLOG: the slow log could not be set up: %v", err)
		return false
	}
	return true
}

// cmdStat is one command's INFO commandstats counters.
type cmdStat struct {
	calls int64
	usec  int64
}

// commandStats reads INFO commandstats of a single Redis (nil on a cluster).
func commandStats(ctx context.Context, rdb redis.UniversalClient) (map[string]cmdStat, error) {
	c, ok := rdb.(*redis.Client)
	if !ok {
		return nil, nil
	}
	info, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("read commandstats: %w", err)
	}
	out := map[string]cmdStat{}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(k, "cmdstat_") {
			continue
		}
		var st cmdStat
		for _, f := range strings.Split(v, ",") {
			if x, ok := strings.CutPrefix(f, "calls="); ok {
				st.calls, _ = strconv.ParseInt(x, 10, 64)
			} else if x, ok := strings.CutPrefix(f, "usec="); ok {
				st.usec, _ = strconv.ParseInt(x, 10, 64)
			}
		}
		out[strings.TrimPrefix(k, "cmdstat_")] = st
	}
	return out, nil
}

// commandSplit renders the commands run between two INFO commandstats
// readings, per delivery, the most time first.
func commandSplit(before, after map[string]cmdStat, n int64) string {
	type cmd struct {
		name  string
		us    float64
		calls float64
	}
	var cs []cmd
	for name, st := range after {
		b := before[name]
		if st.usec > b.usec {
			cs = append(cs, cmd{name, float64(st.usec-b.usec) / float64(n), float64(st.calls-b.calls) / float64(n)})
		}
	}
	sort.Slice(cs, func(i, j int) bool { return cs[i].us > cs[j].us })
	parts := make([]string, 0, len(cs))
	for _, c := range cs {
		if c.us >= 0.1 {
			parts = append(parts, fmt.Sprintf("%s %.1fµs %.2f", c.name, c.us, c.calls))
		}
	}
	return strings.Join(parts, ", ")
}

// scriptSplit reads the whole slow log and renders the time of each
// script per delivery (EVALSHA by its sha), most first.
func scriptSplit(ctx context.Context, rdb redis.UniversalClient, n int64) string {
	names := map[string]string{}
	for _, sc := range keyspace.Scripts() {
		names[sc.Hash()] = sc.Name
	}
	logs, err := rdb.SlowLogGet(ctx, -1).Result()
	if err != nil {
		return err.Error()
	}
	us := map[string]time.Duration{}
	calls := map[string]int{}
	for _, l := range logs {
		name := ""
		if len(l.Args) > 0 {
			name = strings.ToLower(l.Args[0])
		}
		if name == "evalsha" && len(l.Args) > 1 {
			name = names[l.Args[1]]
			if name == "" {
				name = "evalsha " + l.Args[1][:8]
			}
		}
		us[name] += l.Duration
		calls[name]++
	}
	keys := make([]string, 0, len(us))
	for k := range us {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return us[keys[i]] > us[keys[j]] })
	var parts []string
	for _, k := range keys {
		if d := us[k] / time.Duration(n); d >= 100*time.Nanosecond {
			parts = append(parts, fmt.Sprintf("%s %.1fµs (%d calls)", k, float64(d)/1e3, calls[k]))
		}
	}
	return fmt.Sprintf("%d entries: %s", len(logs), strings.Join(parts, ", "))
}
