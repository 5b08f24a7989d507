package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/wakegate/wakegate/integration/bench"
)

// exitMissed is bench's exit status when a figure missed its target.
const exitMissed = 3

func runBench(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "baseline-server" { // started by a bench run, not by people
		err := bench.ServeBaseline(ctx, os.Getenv("WAKEGATE_ADDR"), os.Getenv("WAKEGATE_REDIS_URL"),
			os.Getenv("WAKEGATE_REDIS_PREFIX"), strings.Split(os.Getenv("WAKEGATE_GITHUB_WEBHOOK_SECRETS"), ",")[0])
		if err != nil {
			fmt.Fprintf(stderr, "wakegate bench baseline-server: %v\n", err)
			return 1
		}
		return 0
	}
	fs := flag.NewFlagSet("wakegate bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o bench.Options
	var asJSON bool
	var html, record string
	fs.DurationVar(&o.Duration, "duration", 0, "length of each measured phase (default: the scenario's)")
	fs.DurationVar(&o.Warmup, "warmup", 0, "unmeasured load before each phase (default: the scenario's)")
	fs.Float64Var(&o.Rate, "rate", 0, "offered requests (or events) per second of open-loop phases (default: the scenario's)")
	fs.IntVar(&o.Conns, "conns", 0, "connections of closed-loop phases (default: the scenario's)")
	fs.IntVar(&o.Gateways, "gateways", 1, "gateway processes to start")
	fs.IntVar(&o.Workers, "workers", 1, "worker processes to start")
	fs.BoolVar(&o.Scale, "scale", false, "run the scenario with 1 and 2 gateways × 1 and 2 workers, side by side")
	fs.StringVar(&o.RedisURL, "redis-url", "", "Redis to run on, under a fresh key prefix deleted at the end (default: start a private redis-server with AOF everysec)")
	fs.BoolVar(&o.RedisCluster, "redis-cluster", false, "start a private three-node Redis Cluster (AOF everysec on each node) instead of one redis-server; fleet reports each node's share of Redis CPU")
	fs.StringVar(&o.Binary, "binary", "", "wakegate binary to start (default: this one)")
	fs.StringVar(&o.ProfileDir, "profile", "", "write a CPU profile of every wakegate process and of the load generator (bench.pprof) into this directory (go tool pprof -top <binary> <file>)")
	fs.IntVar(&o.Sessions, "sessions", 0, "simulated agent sessions (default: the scenario's)")
	fs.IntVar(&o.PRs, "prs", 0, "simulated pull requests (default: the scenario's)")
	fs.IntVar(&o.Supervisors, "supervisors", 0, "simulated supervisors long-polling their inboxes (default: the scenario's)")
	fs.IntVar(&o.Recipients, "recipients", 0, "recipients of each event (fanout)")
	fs.IntVar(&o.Subscriptions, "subscriptions", 0, "subscriptions that match nothing (subscriptions)")
	fs.DurationVar(&o.KillEvery, "kill-every", 0, "SIGKILL a random worker this often and restart it (soak; 0 = never)")
	fs.BoolVar(&asJSON, "json", false, "print the report as JSON instead of a table")
	fs.StringVar(&html, "html", "", "also write an HTML page charting latency over time to this file")
	fs.StringVar(&record, "record", "", "prepend the report's figures to this JSON array (docs/bench/performance.json)")
	fs.Usage = func() {
		fmt.Fprintf(stderr, `Usage: wakegate bench <scenario> [flags]

Starts wakegate (gateway and worker processes of this binary) on Redis,
drives a scenario against it open loop (latency from the intended send
time) or closed loop (throughput), and reports every figure beside the
bare ingest handler (read body, HMAC, one XADD) measured in the same run.

Scenarios:
%s
Exit status: 0 every figure met its target, %d a figure missed it, 1 the
run failed, 2 bad usage.

Flags:
`, bench.Scenarios(), exitMissed)
		fs.PrintDefaults()
	}
	scenario := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		scenario, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if scenario == "" && fs.NArg() > 0 {
		scenario = fs.Arg(0)
	}
	if scenario == "" {
		fs.Usage()
		return 2
	}
	if o.RedisCluster && o.RedisURL != "" {
		fmt.Fprintln(stderr, "wakegate bench: --redis-cluster starts its own Redis; drop --redis-url")
		return 2
	}
	o.Scenario = scenario
	o.Command = "wakegate bench " + strings.Join(append([]string{scenario}, args...), " ")
	o.Progress = stderr
	rep, err := bench.Run(ctx, o)
	if rep != nil {
		if asJSON {
			_ = rep.WriteJSON(stdout)
		} else {
			rep.WriteText(stdout)
		}
		if html != "" {
			if werr := writeFile(html, rep.WriteHTML); werr != nil {
				fmt.Fprintf(stderr, "wakegate bench: %v\n", werr)
			}
		}
		if record != "" && err == nil {
			if werr := recordRows(record, rep.Rows); werr != nil {
				fmt.Fprintf(stderr, "wakegate bench: --record: %v\n", werr)
				return 1
			}
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "wakegate bench %s: %v\n", scenario, err)
		return 1
	}
	if !rep.Passed() {
		return exitMissed
	}
	return 0
}

func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := write(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

// recordRows prepends rows to the JSON array in path (created if absent).
func recordRows(path string, rows []bench.Row) error {
	var old []json.RawMessage
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &old); err != nil {
			return fmt.Errorf("%s is not a JSON array: %w", path, err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	all := make([]any, 0, len(rows)+len(old))
	for _, r := range rows {
		all = append(all, r)
	}
	for _, r := range old {
		all = append(all, r)
	}
	b, err := json.MarshalIndent(all, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
