package bench

import (
	"context"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// clusterNodes is how many masters --redis-cluster starts.
const clusterNodes = 3

// startRedisCluster runs a private Redis Cluster of three masters (no
// replicas) on free loopback ports, each with the AOF settings production
// runs (RedisAOF), joins them with `redis-cli --cluster create` (every
// slot covered, in three even ranges) and sets RedisURL to its
// redis+cluster:// form.
func (s *System) startRedisCluster(ctx context.Context) error {
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		return errors.New("--redis-cluster joins its servers with redis-cli: none on PATH")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		return errors.New("no redis-server on PATH: install it or pass --redis-url")
	}
	var addrs []string
	for i := range clusterNodes {
		port, err := freeClusterPort()
		if err != nil {
			return err
		}
		dir := filepath.Join(s.cfg.Dir, fmt.Sprintf("redis-%d", i+1))
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		p := &proc{name: fmt.Sprintf("redis-%d", i+1), role: "redis", log: filepath.Join(s.cfg.Dir, fmt.Sprintf("redis-%d.log", i+1)),
			addr: "127.0.0.1:" + strconv.Itoa(port), data: dir,
			args: append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
				"--protected-mode", "no", "--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf")}, RedisAOF...)}
		if err := s.launch(p); err != nil {
			return err
		}
		if err := waitRedis(ctx, p); err != nil {
			return err
		}
		addrs = append(addrs, p.addr)
	}
	args := append(append([]string{"--cluster", "create"}, addrs...), "--cluster-replicas", "0", "--cluster-yes")
	if out, err := exec.CommandContext(ctx, cli, args...).CombinedOutput(); err != nil {
		return fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a})
		deadline := time.Now().Add(20 * time.Second)
		for {
			info, err := c.ClusterInfo(ctx).Result()
			if err == nil && strings.Contains(info, "cluster_state:ok") {
				break
			}
			if time.Now().After(deadline) {
				_ = c.Close()
				if err != nil {
					return fmt.Errorf("redis cluster node %s not ok within 20s: %w", a, err)
				}
				return fmt.Errorf("redis cluster node %s not ok within 20s: %s", a, info)
			}
			time.Sleep(50 * time.Millisecond)
		}
		_ = c.Close()
	}
	s.RedisURL = "redis+cluster://" + addrs[0] + "?addr=" + strings.Join(addrs[1:], "&addr=")
	return nil
}

// waitRedis waits until a redis-server just launched answers PING.
func waitRedis(ctx context.Context, p *proc) error {
	c := redis.NewClient(&redis.Options{Addr: p.addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(ctx).Err() != nil {
		select {
		case <-p.done:
			return fmt.Errorf("redis-server exited at start: %s", tail(p.log, 10))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return errors.New("redis-server did not answer within 10s")
		}
	}
	return nil
}

// freeClusterPort is a free loopback port whose cluster bus port (the
// port + 10000, which redis-server binds too) is free as well, both below
// Linux's ephemeral range (32768 up), where client connections could take
// the bus port first.
func freeClusterPort() (int, error) {
	for range 200 {
		port := 10000 + mrand.IntN(10000)
		if portFree(port) && portFree(port+10000) {
			return port, nil
		}
	}
	return 0, errors.New("no free port pair in 10000–30000 for a cluster node")
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// NodeStats is one Redis node's counters: CPU (used_cpu_sys+user), the
// time spent per command (INFO commandstats) and its used_memory.
type NodeStats struct {
	Addr     string
	CPU      time.Duration
	Commands map[string]time.Duration
	Memory   int64
}

// RedisNodes reads every master's counters: each node of a cluster, or
// the one server.
func RedisNodes(ctx context.Context, rdb redis.UniversalClient) ([]NodeStats, error) {
	read := func(ctx context.Context, c *redis.Client) (NodeStats, error) {
		info, err := c.Info(ctx, "cpu", "commandstats", "memory").Result()
		if err != nil {
			return NodeStats{}, err
		}
		n := NodeStats{Addr: c.Options().Addr, Commands: map[string]time.Duration{}}
		for _, line := range strings.Split(info, "\n") {
			k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok {
				continue
			}
			switch {
			case k == "used_memory":
				n.Memory, _ = strconv.ParseInt(v, 10, 64)
			case k == "used_cpu_sys" || k == "used_cpu_user":
				f, _ := strconv.ParseFloat(v, 64)
				n.CPU += time.Duration(f * float64(time.Second))
			case strings.HasPrefix(k, "cmdstat_"):
				for _, f := range strings.Split(v, ",") {
					if us, ok := strings.CutPrefix(f, "usec="); ok {
						u, _ := strconv.ParseInt(us, 10, 64)
						n.Commands[strings.TrimPrefix(k, "cmdstat_")] = time.Duration(u) * time.Microsecond
					}
				}
			}
		}
		return n, nil
	}
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok {
		c, ok := rdb.(*redis.Client)
		if !ok {
			return nil, fmt.Errorf("node counters of a %T", rdb)
		}
		n, err := read(ctx, c)
		return []NodeStats{n}, err
	}
	var mu sync.Mutex
	var out []NodeStats
	err := cc.ForEachMaster(ctx, func(ctx context.Context, c *redis.Client) error {
		n, err := read(ctx, c)
		mu.Lock()
		out = append(out, n)
		mu.Unlock()
		return err
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out, err
}

// nodeShares is what each node did between two readings: its share of
// the nodes' CPU, and its busiest commands by time. busiest is the
// largest share.
func nodeShares(before, after []NodeStats) (lines []string, busiest float64) {
	prev := map[string]NodeStats{}
	for _, n := range before {
		prev[n.Addr] = n
	}
	var total time.Duration
	for _, n := range after {
		total += n.CPU - prev[n.Addr].CPU
	}
	if total <= 0 {
		return nil, 0
	}
	for _, n := range after {
		cpu := n.CPU - prev[n.Addr].CPU
		share := float64(cpu) / float64(total)
		busiest = max(busiest, share)
		type cmd struct {
			name string
			d    time.Duration
		}
		var cmds []cmd
		var all time.Duration
		for name, d := range n.Commands {
			d -= prev[n.Addr].Commands[name]
			if d > 0 {
				cmds = append(cmds, cmd{name, d})
				all += d
			}
		}
		sort.Slice(cmds, func(i, j int) bool { return cmds[i].d > cmds[j].d })
		var top []string
		for _, c := range cmds[:min(len(cmds), 5)] {
			top = append(top, fmt.Sprintf("%s %.0f%%", c.name, 100*float64(c.d)/float64(all)))
		}
		lines = append(lines, fmt.Sprintf("%s: %.1f%% of Redis CPU (%s), used_memory %.1f MB (%+.1f MB); command time: %s",
			n.Addr, 100*share, cpu.Round(10*time.Millisecond), float64(n.Memory)/1e6, float64(n.Memory-prev[n.Addr].Memory)/1e6,
			strings.Join(top, ", ")))
	}
	return lines, busiest
}

// clusterAddrs are the seed addresses of a redis+cluster:// URL as
// startRedisCluster writes it.
func clusterAddrs(u string) []string {
	rest := strings.TrimPrefix(u, "redis+cluster://")
	first, query, _ := strings.Cut(rest, "?")
	addrs := []string{first}
	for _, kv := range strings.Split(query, "&") {
		if a, ok := strings.CutPrefix(kv, "addr="); ok {
			addrs = append(addrs, a)
		}
	}
	return addrs
}

// maxNodeShare is the target of the busiest node's share of a three-node
// cluster's Redis CPU.
const maxNodeShare = 0.45

// nodeRows reports, on the private cluster, each node's share of Redis
// CPU during the measured load (with its busiest commands) and, as a row
// against its target, the busiest node's.
func nodeRows(ctx context.Context, r *runner, sys *System, what string, before []NodeStats, err error) {
	var after []NodeStats
	if err == nil {
		after, err = RedisNodes(ctx, sys.Redis)
	}
	if err != nil {
		r.note("Redis nodes' counters could not be read: %v", err)
		return
	}
	lines, busiest := nodeShares(before, after)
	for _, l := range lines {
		r.note("%s: Redis Cluster node %s", what, l)
	}
	r.rep.row(what+": busiest Redis Cluster node's share of Redis CPU (3 nodes; ≤ 45 %)", 100*busiest, "%", 0, 0,
		verdict(busiest <= maxNodeShare))
}
