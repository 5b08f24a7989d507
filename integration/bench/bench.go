// Package bench is `wakegate bench`: an open-loop load generator for the
// whole pipeline. It starts wakegate — gateway and worker processes of
// this binary — on a Redis (by default a private redis-server with AOF
// everysec), drives a scenario against it, and measures every figure
// beside a baseline from the same run: the bare ingest handler (read the
// body, verify its HMAC, one XADD), served in its own process by the same
// tool.
package bench

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/pprof"
	"sort"
	"strings"
	"time"
)

// Options are a run's settings (the flags of `wakegate bench`).
type Options struct {
	Scenario string
	Duration time.Duration // of each measured phase
	Warmup   time.Duration
	Rate     float64 // offered per second (open loop); the scenario's default when 0
	Conns    int     // connections of closed-loop phases (and most in flight of open ones)
	Gateways int
	Workers  int
	RedisURL string // "" → a private redis-server (AOF everysec)
	// RedisCluster starts a private three-node Redis Cluster instead
	// (fleet reports each node's share of Redis CPU).
	RedisCluster bool
	Binary       string // the wakegate binary to start (default: this one)
	// ProfileDir, when set, receives a CPU profile of every process, the
	// load generator's own included (bench.pprof).
	ProfileDir string
	// Scale runs the scenario with 1 and 2 gateways and 1 and 2 workers.
	Scale bool

	// Sizes of the simulated world (fleet, soak, fanout, subscriptions).
	Sessions      int
	PRs           int
	Supervisors   int
	Recipients    int
	Subscriptions int
	// KillEvery SIGKILLs a random worker this often (soak); 0 = never.
	KillEvery time.Duration

	// Command is the command line, for the report.
	Command string
	// Progress receives a progress line while a phase runs (nil: none).
	Progress io.Writer
}

// scenario is one kind of load.
type scenario struct {
	about    string
	defaults Options // zero fields are left to the caller
	run      func(ctx context.Context, r *runner) error
}

// scenarios are the kinds of load `wakegate bench` knows, by name.
var scenarios = map[string]*scenario{}

// Scenarios describes each scenario, for --help.
func Scenarios() string {
	names := make([]string, 0, len(scenarios))
	for n := range scenarios {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		fmt.Fprintf(&b, "  %-14s %s\n", n, scenarios[n].about)
	}
	return b.String()
}

// runner is one run in progress: its options and the report it fills.
type runner struct {
	o   Options
	rep *Report
}

// Run runs the scenario o names and returns what it measured. A figure
// that misses its target is in the report (Report.Passed), not an error.
func Run(ctx context.Context, o Options) (*Report, error) {
	sc, ok := scenarios[o.Scenario]
	if !ok {
		return nil, fmt.Errorf("unknown scenario %q; scenarios:\n%s", o.Scenario, Scenarios())
	}
	o = withDefaults(o, sc.defaults)
	if o.ProfileDir != "" {
		if err := os.MkdirAll(o.ProfileDir, 0o755); err != nil {
			return nil, err
		}
		f, err := os.Create(filepath.Join(o.ProfileDir, "bench.pprof"))
		if err != nil {
			return nil, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return nil, fmt.Errorf("profile the load generator: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if o.Scale {
		return runScaling(ctx, o, sc)
	}
	r := &runner{o: o, rep: &Report{Scenario: o.Scenario, Command: o.Command, Date: time.Now().UTC(), Machine: newMachine()}}
	err := sc.run(ctx, r)
	r.rep.Machine.LoadEnd = loadAvg()
	return r.rep, err
}

func withDefaults(o, d Options) Options {
	set := func(v *time.Duration, def time.Duration) {
		if *v == 0 {
			*v = def
		}
	}
	seti := func(v *int, def int) {
		if *v == 0 {
			*v = def
		}
	}
	set(&o.Duration, d.Duration)
	set(&o.Warmup, d.Warmup)
	if o.Rate == 0 {
		o.Rate = d.Rate
	}
	seti(&o.Conns, cmp.Or(d.Conns, 64))
	seti(&o.Gateways, 1)
	seti(&o.Workers, 1)
	seti(&o.Sessions, d.Sessions)
	seti(&o.PRs, d.PRs)
	seti(&o.Supervisors, d.Supervisors)
	seti(&o.Recipients, d.Recipients)
	seti(&o.Subscriptions, d.Subscriptions)
	set(&o.KillEvery, d.KillEvery)
	return o
}

// start starts the system under test with the run's gateways and workers;
// env (WAKEGATE_…=…) is added to their environment.
func (r *runner) start(ctx context.Context, env ...string) (*System, error) {
	sys, err := Start(ctx, SystemConfig{Binary: r.o.Binary, RedisURL: r.o.RedisURL, RedisCluster: r.o.RedisCluster, Gateways: r.o.Gateways, Workers: r.o.Workers, ProfileDir: r.o.ProfileDir, Env: env})
	if err != nil {
		return nil, err
	}
	where := "a private redis-server (AOF everysec)"
	if sys.Cluster {
		where = "a private three-node Redis Cluster (no replicas, AOF everysec on each)"
	}
	if !sys.Private {
		where = "Redis " + redactURL(sys.RedisURL) + " (shared: Redis CPU not counted)"
	}
	r.rep.Setup = fmt.Sprintf("%d gateway(s), %d worker(s), load generator and %s on this machine", r.o.Gateways, r.o.Workers, where)
	return sys, nil
}

// loop runs l with the run's progress display and adds its result.
func (r *runner) loop(ctx context.Context, l Loop) Result {
	var done func()
	if r.o.Progress != nil {
		l.Progress, done = progressPrinter(r.o.Progress)
	}
	res := l.Run(ctx)
	if done != nil {
		done()
	}
	return res
}

// baseline runs l against the bare ingest handler — started for it in a
// process of its own, stopped after so that it costs the next phase
// nothing — and adds the result. Without l.Duration it is the closed
// loop every throughput is compared with.
func (r *runner) baseline(ctx context.Context, sys *System, l Loop) (Result, error) {
	if l.Duration == 0 {
		l = Loop{Name: "baseline, closed loop", Conns: r.o.Conns, Duration: r.o.Duration, Warmup: r.o.Warmup}
	}
	base, err := sys.StartBaseline(ctx)
	if err != nil {
		return Result{}, err
	}
	defer sys.StopRole("baseline")
	c := newHTTPClient(max(l.Conns, 64))
	defer c.CloseIdleConnections()
	l.Do = hooks(c, []string{base}, 0, nil)
	return r.measure(ctx, sys, l, true), nil
}

// measure runs l and sets its CPU per request: the wakegate processes
// and (private) Redis, or the baseline process and Redis; and that CPU
// split by process, the load generator's included.
func (r *runner) measure(ctx context.Context, sys *System, l Loop, baseline bool) Result {
	byProcess := func() map[string]time.Duration {
		m := map[string]time.Duration{"bench": procCPU(os.Getpid())}
		g, rd := sys.CPU(ctx)
		if sys.Private {
			m["redis"] = rd
		}
		if baseline {
			m["baseline"] = sys.RoleCPU("baseline")
		} else {
			m["gateway"] = sys.RoleCPU("gateway")
			m["worker"] = g - m["gateway"] // the workers, and the retired processes of a soak
		}
		return m
	}
	c0 := byProcess()
	res := r.loop(ctx, l)
	if n := res.N + int64(errorCount(res)); n > 0 {
		c1 := byProcess()
		res.CPUByProcess = map[string]time.Duration{}
		for k, v := range c1 {
			res.CPUByProcess[k] = (v - c0[k]) / time.Duration(n)
			if k != "bench" {
				res.CPUPerOp += res.CPUByProcess[k]
			}
		}
	}
	r.rep.Phases = append(r.rep.Phases, res)
	return res
}

func errorCount(res Result) int {
	n := 0
	for _, k := range res.Errors {
		n += k
	}
	return n
}

// progressPrinter draws one line that rewrites itself on a terminal, and
// a line every 10 s elsewhere; done clears the terminal's line.
func progressPrinter(w io.Writer) (show func(Progress), done func()) {
	tty := false
	if f, ok := w.(*os.File); ok {
		if st, err := f.Stat(); err == nil {
			tty = st.Mode()&os.ModeCharDevice != 0
		}
	}
	last := time.Now()
	done = func() {
		if tty {
			fmt.Fprint(w, "\r\033[K")
		}
	}
	return func(p Progress) {
		if !tty && time.Since(last) < 10*time.Second {
			return
		}
		last = time.Now()
		frac := min(1, max(0, p.Elapsed.Seconds()/p.Total.Seconds()))
		const width = 24
		bar := strings.Repeat("█", int(frac*width)) + strings.Repeat("░", width-int(frac*width))
		offered := "closed loop"
		if p.Offered > 0 {
			offered = rate(p.Offered) + "/s offered"
		}
		line := fmt.Sprintf("%-28s %s %3.0f%% %s/%s  %s, %s/s done, %d in flight, %d errors",
			p.Name, bar, frac*100, p.Elapsed.Round(time.Second), p.Total.Round(time.Second), offered, rate(p.RecentPerSec), p.InFlight, p.Errors)
		if tty {
			fmt.Fprintf(w, "\r\033[K%s", line)
		} else {
			fmt.Fprintln(w, line)
		}
	}, done
}

// note adds a line to the report (and shows it while running).
func (r *runner) note(format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	r.rep.Notes = append(r.rep.Notes, s)
}
