package bench

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// Secrets of a bench run: the system under test is started with them and
// the load is signed with them. They protect nothing but a throwaway key
// prefix.
const (
	webhookSecret = "bench-webhook-secret"
	tokenSecret   = "bench-token-secret-0123456789abcdef"
	workspace     = "default"
	shards        = 16
)

// SystemConfig says what to start.
type SystemConfig struct {
	Binary   string // the wakegate binary to run (default: this one)
	RedisURL string // "" → a private redis-server with AOF everysec
	// RedisCluster starts a private three-node Redis Cluster instead
	// (each node with AOF everysec).
	RedisCluster bool
	Gateways     int
	Workers      int
	// Env is added to every process's environment (WAKEGATE_…=…).
	Env []string
	// ProfileDir, when set, receives a CPU profile of each process.
	ProfileDir string
	// Dir holds the processes' logs and the private Redis's files.
	Dir string
}

// System is wakegate under test: gateway and worker processes of the
// wakegate binary on one Redis, under a fresh key prefix. Everything it
// started stops with Stop.
type System struct {
	cfg      SystemConfig
	Redis    redis.UniversalClient // a *redis.ClusterClient on a cluster
	RedisURL string
	Prefix   string
	// Gateways are the base URLs of the gateway processes.
	Gateways []string
	// Private says the Redis was started for this run alone, so its CPU
	// and memory figures are this run's.
	Private bool
	// Cluster says Redis is the private three-node cluster.
	Cluster bool

	mu      sync.Mutex
	procs   []*proc
	redis   []*proc
	retired time.Duration // CPU of processes that exited (killed workers)
}

// proc is one child process.
type proc struct {
	name string
	role string
	args []string
	env  []string
	addr string // its HTTP address (gateway API or worker admin)
	data string // a private Redis's data directory, removed when it stops
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	log  string
}

// Start starts Redis (unless given), the workers, then the gateways, and
// waits until each answers /readyz.
func Start(ctx context.Context, cfg SystemConfig) (*System, error) {
	if cfg.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find the wakegate binary: %w", err)
		}
		cfg.Binary = exe
	}
	if cfg.Dir == "" {
		d, err := os.MkdirTemp("", "wakegate-bench-")
		if err != nil {
			return nil, err
		}
		cfg.Dir = d
	}
	s := &System{cfg: cfg, RedisURL: cfg.RedisURL, Prefix: "bench" + randomHex(4)}
	switch {
	case cfg.RedisCluster:
		if err := s.startRedisCluster(ctx); err != nil {
			s.Stop()
			return nil, err
		}
		s.Private, s.Cluster = true, true
	case s.RedisURL == "":
		if err := s.startRedis(ctx); err != nil {
			return nil, err
		}
		s.Private = true
	}
	if s.Cluster {
		s.Redis = redis.NewClusterClient(&redis.ClusterOptions{Addrs: clusterAddrs(s.RedisURL), PoolSize: 64})
	} else {
		opt, err := redis.ParseURL(s.RedisURL)
		if err != nil {
			s.Stop()
			return nil, fmt.Errorf("--redis-url: %w", err)
		}
		opt.PoolSize = 64
		s.Redis = redis.NewClient(opt)
	}
	if err := s.Redis.Ping(ctx).Err(); err != nil {
		s.Stop()
		return nil, fmt.Errorf("redis at %s: %w", redactURL(s.RedisURL), err)
	}
	for i := range cfg.Workers {
		if _, err := s.startProc(ctx, "worker", i+1); err != nil {
			s.Stop()
			return nil, err
		}
	}
	for i := range cfg.Gateways {
		p, err := s.startProc(ctx, "gateway", i+1)
		if err != nil {
			s.Stop()
			return nil, err
		}
		s.Gateways = append(s.Gateways, "http://"+p.addr)
	}
	return s, nil
}

// env is what every wakegate process of the run gets.
func (s *System) env() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WAKEGATE_") {
			env = append(env, kv)
		}
	}
	env = append(env,
		"WAKEGATE_REDIS_URL="+s.RedisURL,
		"WAKEGATE_REDIS_PREFIX="+s.Prefix,
		"WAKEGATE_GITHUB_WEBHOOK_SECRETS="+webhookSecret,
		"WAKEGATE_JWT_HS256_SECRET="+tokenSecret,
		"WAKEGATE_INGEST_LIMITS=workspace=1000000/s,token=1000000/s",
		"WAKEGATE_ALLOW_PRIVATE_ENDPOINTS=true",
		"WAKEGATE_LOG_LEVEL=warn",
	)
	return append(env, s.cfg.Env...)
}

func (s *System) startProc(ctx context.Context, role string, n int) (*proc, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &proc{name: fmt.Sprintf("%s-%d", role, n), role: role, args: []string{role}, addr: "127.0.0.1:" + strconv.Itoa(port)}
	if role == "baseline" {
		p.args = []string{"bench", "baseline-server"}
	}
	p.env = append(s.env(), "WAKEGATE_ADDR="+p.addr, "WAKEGATE_WORKER_ADDR="+p.addr)
	if s.cfg.ProfileDir != "" {
		p.env = append(p.env, "WAKEGATE_CPU_PROFILE="+filepath.Join(s.cfg.ProfileDir, p.name+".pprof"))
	}
	p.log = filepath.Join(s.cfg.Dir, p.name+".log")
	if err := s.launch(p); err != nil {
		return nil, err
	}
	if err := waitReady(ctx, p, "http://"+p.addr+"/readyz", 30*time.Second); err != nil {
		return nil, err
	}
	return p, nil
}

// launch starts p (again) and registers it.
func (s *System) launch(p *proc) error {
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	bin := s.cfg.Binary
	if p.role == "redis" {
		bin = "redis-server"
	}
	p.cmd = exec.Command(bin, p.args...)
	p.cmd.Env = p.env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.done = make(chan struct{})
	if err := p.cmd.Start(); err != nil {
		_ = f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	s.mu.Lock()
	if p.role == "redis" {
		s.redis = append(s.redis, p)
	} else {
		s.procs = append(s.procs, p)
	}
	s.mu.Unlock()
	return nil
}

func waitReady(ctx context.Context, p *proc, url string, within time.Duration) error {
	deadline := time.Now().Add(within)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited at start (%v); its log: %s\n%s", p.name, p.err, p.log, tail(p.log, 20)) //nolint:errorlint // p.err is nil on a clean exit
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s; its log: %s\n%s", p.name, within, p.log, tail(p.log, 20))
		}
	}
}

// RedisAOF are the AOF settings of the private redis-server, those of
// deployments/redis.conf (cmd/wakegate/deployments_test.go holds them
// equal): fsync every second, and a rewrite once the AOF has doubled and
// is at least 1 GB.
var RedisAOF = []string{"--appendonly", "yes", "--appendfsync", "everysec",
	"--auto-aof-rewrite-percentage", "100", "--auto-aof-rewrite-min-size", "1gb"}

// startRedis runs a private redis-server on a free loopback port with
// the AOF settings production runs (RedisAOF).
func (s *System) startRedis(ctx context.Context) error {
	if _, err := exec.LookPath("redis-server"); err != nil {
		return errors.New("no redis-server on PATH: install it or pass --redis-url")
	}
	port, err := freePort()
	if err != nil {
		return err
	}
	dir := filepath.Join(s.cfg.Dir, "redis")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	p := &proc{name: "redis", role: "redis", log: filepath.Join(s.cfg.Dir, "redis.log"), addr: "127.0.0.1:" + strconv.Itoa(port), data: dir,
		args: append([]string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir, "--save", "",
			"--protected-mode", "no"}, RedisAOF...)}
	if err := s.launch(p); err != nil {
		return err
	}
	s.RedisURL = "redis://" + p.addr
	opt, _ := redis.ParseURL(s.RedisURL)
	c := redis.NewClient(opt)
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

// StartBaseline starts the bare ingest handler in its own process on the
// same Redis and returns its base URL.
func (s *System) StartBaseline(ctx context.Context) (string, error) {
	p, err := s.startProc(ctx, "baseline", 1)
	if err != nil {
		return "", err
	}
	return "http://" + p.addr, nil
}

// StopRole stops the running processes of a role (SIGTERM).
func (s *System) StopRole(role string) {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()
	for _, p := range procs {
		if p.role == role {
			stopProc(p, 20*time.Second)
		}
	}
}

// SignalRole sends sig to the running processes of a role: SIGSTOP and
// SIGCONT pause and resume them (the ingest scenario pauses the workers to
// measure the gateway path and then derivation on its own).
func (s *System) SignalRole(role string, sig syscall.Signal) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, p := range s.procs {
		if p.role == role && !exited(p) {
			if err := p.cmd.Process.Signal(sig); err != nil {
				return fmt.Errorf("signal %s: %w", p.name, err)
			}
		}
	}
	return nil
}

// Workers is how many worker processes are running.
func (s *System) Workers() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, p := range s.procs {
		if p.role == "worker" && !exited(p) {
			out = append(out, p.name)
		}
	}
	return out
}

// KillWorker SIGKILLs the named worker (a crash: nothing is flushed) and
// starts it again on the same address; it returns when the new one is
// ready.
func (s *System) KillWorker(ctx context.Context, name string) error {
	s.mu.Lock()
	var p *proc
	for i, q := range s.procs {
		if q.name == name && !exited(q) {
			p = q
			s.procs = append(s.procs[:i:i], s.procs[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	if p == nil {
		return fmt.Errorf("no running worker %s", name)
	}
	cpu := procCPU(p.cmd.Process.Pid)
	_ = p.cmd.Process.Kill()
	<-p.done
	s.mu.Lock()
	s.retired += cpu
	s.mu.Unlock()
	again := &proc{name: p.name, role: p.role, args: p.args, env: p.env, addr: p.addr, log: p.log}
	if err := s.launch(again); err != nil {
		return err
	}
	return waitReady(ctx, again, "http://"+again.addr+"/readyz", 30*time.Second)
}

func exited(p *proc) bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// CPU is the CPU time the gateways and workers used so far (killed ones
// included up to their last reading), and Redis's own when it is
// private (else 0).
func (s *System) CPU(ctx context.Context) (wakegate, redisCPU time.Duration) {
	s.mu.Lock()
	wakegate = s.retired
	for _, p := range s.procs {
		if p.role != "baseline" && !exited(p) {
			wakegate += procCPU(p.cmd.Process.Pid)
		}
	}
	s.mu.Unlock()
	if s.Private {
		redisCPU = RedisCPU(ctx, s.Redis)
	}
	return wakegate, redisCPU
}

// RoleCPU is the CPU time of the running processes of one role.
func (s *System) RoleCPU(role string) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, p := range s.procs {
		if p.role == role && !exited(p) {
			d += procCPU(p.cmd.Process.Pid)
		}
	}
	return d
}

// Stop stops the wakegate processes (SIGTERM, so CPU profiles are
// written), deletes the run's keys from a shared Redis, and stops a
// private one.
func (s *System) Stop() {
	s.mu.Lock()
	procs := s.procs
	s.mu.Unlock()
	// Gateways first, as a rolling deploy would.
	for _, role := range []string{"baseline", "gateway", "worker"} {
		for _, p := range procs {
			if p.role == role {
				stopProc(p, 20*time.Second)
			}
		}
	}
	if s.Redis != nil {
		if !s.Private {
			flush(s.Redis, s.Prefix)
		}
		_ = s.Redis.Close()
	}
	// The AOF of a long run is hundreds of MB: it goes with its Redis
	// (the logs stay in Dir).
	for _, p := range s.redis {
		stopProc(p, 10*time.Second)
		if p.data != "" {
			_ = os.RemoveAll(p.data)
		}
	}
}

func stopProc(p *proc, grace time.Duration) {
	if exited(p) {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// flush deletes every key of the run's prefix.
func flush(rdb redis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	iter := rdb.Scan(ctx, 0, prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		if keys = append(keys, iter.Val()); len(keys) == 500 {
			rdb.Unlink(ctx, keys...)
			keys = keys[:0]
		}
	}
	if len(keys) > 0 {
		rdb.Unlink(ctx, keys...)
	}
}

// RedisCPU is the CPU time the Redis server used since it started (on a
// cluster: all its masters).
func RedisCPU(ctx context.Context, rdb redis.UniversalClient) time.Duration {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		nodes, _ := RedisNodes(ctx, rdb)
		var d time.Duration
		for _, n := range nodes {
			d += n.CPU
		}
		return d
	}
	info, err := rdb.Info(ctx, "cpu").Result()
	if err != nil {
		return 0
	}
	var secs float64
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		if ok && (k == "used_cpu_sys" || k == "used_cpu_user") {
			f, _ := strconv.ParseFloat(v, 64)
			secs += f
		}
	}
	return time.Duration(secs * float64(time.Second))
}

// procCPU is a process's user+system CPU time from /proc (0 when gone).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (field 2) may hold spaces; fields after ")" are fixed.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64) // field 14
	st, _ := strconv.ParseInt(f[12], 10, 64) // field 15
	const clockTicks = 100                   // USER_HZ on Linux
	return time.Duration(ut+st) * time.Second / clockTicks
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// tail is the last n lines of a log file, for an error message.
func tail(path string, n int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if lines = append(lines, sc.Text()); len(lines) > n {
			lines = lines[1:]
		}
	}
	return strings.Join(lines, "\n")
}

// redactURL drops a password from a Redis URL for messages.
func redactURL(u string) string {
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			return u[:j+3] + "…@" + u[i+1:]
		}
	}
	return u
}

// persistence is a single Redis's AOF figures (INFO persistence and
// stats): its size, rewrites, the last rewrite's seconds, the last
// fork's µs and the fsyncs it delayed. Nil on a cluster or an error.
func persistence(ctx context.Context, rdb redis.UniversalClient) map[string]int64 {
	if _, ok := rdb.(*redis.ClusterClient); ok {
		return nil
	}
	info, err := rdb.Info(ctx, "persistence", "stats").Result()
	if err != nil {
		return nil
	}
	m := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		k, v, ok := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "aof_enabled", "aof_current_size", "aof_rewrites", "aof_rewrite_in_progress", "aof_rewrite_scheduled", "aof_last_rewrite_time_sec", "latest_fork_usec", "aof_delayed_fsync":
			if n, err := strconv.ParseInt(v, 10, 64); ok && err == nil {
				m[k] = n
			}
		}
	}
	return m
}

// rewriteAOF has a single Redis with AOF on rewrite it, and waits for
// the rewrite to end (within), so that a load starts from an AOF of what
// the data is rather than of how it was written. Nothing on a cluster or
// a Redis without AOF.
func rewriteAOF(ctx context.Context, rdb redis.UniversalClient, within time.Duration) error {
	if p := persistence(ctx, rdb); p == nil || p["aof_enabled"] != 1 {
		return nil
	}
	if err := rdb.Do(ctx, "BGREWRITEAOF").Err(); err != nil {
		return fmt.Errorf("rewrite the AOF: %w", err)
	}
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		p := persistence(ctx, rdb)
		if p["aof_rewrite_in_progress"] == 0 && p["aof_rewrite_scheduled"] == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("the AOF rewrite did not end within %s", within)
}
