package integration

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/redistest"
)

// Bounds of the harness.
const (
	readyTimeout = 20 * time.Second // a process answers /readyz 200 within this
	stopTimeout  = 15 * time.Second // a SIGTERMed process exits within this
)

// stack is what the processes of one test share: a Redis prefix (or the
// embedded Redis), secrets and common settings.
type stack struct {
	t          *testing.T
	rdb        *redis.Client // nil for an embedded serve
	prefix     string
	hookSecret string
	jwtSecret  []byte
	env        map[string]string
}

// newStack prepares processes on the real test Redis under a fresh prefix
// (flushed when the test ends, after its processes have stopped). extra
// overrides or adds settings.
func newStack(t *testing.T, extra map[string]string) *stack {
	t.Helper()
	rdb, prefix := redistest.New(t)
	s := &stack{t: t, rdb: rdb, prefix: prefix, hookSecret: "hook-secret-" + prefix, jwtSecret: []byte("jwt-secret-0123456789abcdef-" + prefix)}
	s.env = map[string]string{
		"WAKEGATE_REDIS_URL":              redistest.URL(),
		"WAKEGATE_REDIS_PREFIX":           prefix,
		"WAKEGATE_GITHUB_WEBHOOK_SECRETS": s.hookSecret,
		"WAKEGATE_JWT_HS256_SECRET":       string(s.jwtSecret),
		"WAKEGATE_INGEST_LIMITS":          "workspace=1000000/s,token=1000000/s",
		"WAKEGATE_LOG_LEVEL":              "info",
	}
	for k, v := range extra {
		s.env[k] = v
	}
	return s
}

// newEmbeddedStack prepares a serve with no WAKEGATE_REDIS_URL: it embeds
// its own in-memory Redis. Secrets are passed so the test knows them.
func newEmbeddedStack(t *testing.T, extra map[string]string) *stack {
	s := &stack{t: t, prefix: "wg", hookSecret: "hook-secret-embedded", jwtSecret: []byte("jwt-secret-embedded-0123456789abcdef")}
	s.env = map[string]string{
		"WAKEGATE_GITHUB_WEBHOOK_SECRETS": s.hookSecret,
		"WAKEGATE_JWT_HS256_SECRET":       string(s.jwtSecret),
		"WAKEGATE_INGEST_LIMITS":          "workspace=1000000/s,token=1000000/s",
		"WAKEGATE_LOG_LEVEL":              "info",
	}
	for k, v := range extra {
		s.env[k] = v
	}
	return s
}

// proc is one wakegate process. It keeps its ports across restarts, so a
// restarted process is the same endpoint on the same Redis prefix.
type proc struct {
	t    *testing.T
	name string
	role string // serve, gateway or worker
	env  []string
	Addr string // WAKEGATE_ADDR (the HTTP API of serve and gateway)
	Work string // WAKEGATE_WORKER_ADDR (a worker's /readyz)

	mu    sync.Mutex
	cmd   *exec.Cmd
	done  chan struct{}
	state *os.ProcessState
	logs  *logBuf
	runs  int
}

// start starts a process of role and waits until it is ready. When the test
// ends a process still running gets SIGTERM and must exit 0 within
// stopTimeout.
func (s *stack) start(name, role string, extra map[string]string) *proc {
	s.t.Helper()
	var p *proc
	for attempt := 1; ; attempt++ {
		p = &proc{t: s.t, name: name, role: role, Addr: freeAddr(s.t), Work: freeAddr(s.t), logs: &logBuf{}}
		env := map[string]string{}
		for k, v := range s.env {
			env[k] = v
		}
		for k, v := range extra {
			env[k] = v
		}
		env["WAKEGATE_ADDR"], env["WAKEGATE_WORKER_ADDR"] = p.Addr, p.Work
		p.env = processEnv(env)
		p.spawn()
		err := p.waitReady(readyTimeout)
		if err == nil {
			break
		}
		// A port picked as free may have been taken in between: retry.
		if attempt < 3 && strings.Contains(p.logs.String(), "address already in use") {
			p.waitExit(stopTimeout)
			continue
		}
		p.signal(syscall.SIGKILL)
		p.waitExit(stopTimeout)
		s.t.Fatalf("%s did not become ready: %v\n%s", name, err, p.logs.tail(40))
	}
	s.t.Cleanup(func() {
		if p.running() {
			code, err := p.stop(stopTimeout)
			if err != nil {
				s.t.Errorf("%s: %v", p.name, err)
			} else if code != 0 {
				s.t.Errorf("%s exited %d on SIGTERM, want 0\n%s", p.name, code, p.logs.tail(20))
			}
		}
		if s.t.Failed() {
			s.t.Logf("last log lines of %s:\n%s", p.name, p.logs.tail(30))
		}
	})
	return p
}

// processEnv is the environment of a process: the test's own without any
// WAKEGATE_* setting, plus env.
func processEnv(env map[string]string) []string {
	var out []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "WAKEGATE_") {
			out = append(out, kv)
		}
	}
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		out = append(out, k+"="+env[k])
	}
	return out
}

func (p *proc) spawn() {
	p.t.Helper()
	cmd := exec.Command(binPath, p.role)
	cmd.Env = p.env
	p.mu.Lock()
	p.runs++
	fmt.Fprintf(p.logs, "---- %s run %d ----\n", p.name, p.runs)
	p.mu.Unlock()
	cmd.Stdout, cmd.Stderr = p.logs, p.logs
	if err := cmd.Start(); err != nil {
		p.t.Fatalf("start %s: %v", p.name, err)
	}
	done := make(chan struct{})
	p.mu.Lock()
	p.cmd, p.done, p.state = cmd, done, nil
	p.mu.Unlock()
	go func() {
		_ = cmd.Wait()
		p.mu.Lock()
		p.state = cmd.ProcessState
		p.mu.Unlock()
		close(done)
	}()
}

func (p *proc) running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// readyURL is where readiness is polled: the API of serve and gateway, the
// admin listener of a worker.
func (p *proc) readyURL() string {
	if p.role == "worker" {
		return "http://" + p.Work + "/readyz"
	}
	return "http://" + p.Addr + "/readyz"
}

// waitReady polls /readyz until it answers 200, the process exits, or the
// deadline passes.
func (p *proc) waitReady(timeout time.Duration) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(timeout)
	for {
		if !p.running() {
			return fmt.Errorf("%s exited before it was ready (%v)", p.name, p.exitState())
		}
		resp, err := hc.Get(p.readyURL())
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready after %s (last: %v)", p.name, timeout, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (p *proc) signal(sig syscall.Signal) {
	p.mu.Lock()
	cmd := p.cmd
	p.mu.Unlock()
	if cmd != nil && cmd.Process != nil {
		_ = cmd.Process.Signal(sig)
	}
}

// waitExit waits for the process to exit and returns its exit code (-1 when
// killed by a signal), or an error after timeout.
func (p *proc) waitExit(timeout time.Duration) (int, error) {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	select {
	case <-done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.state.ExitCode(), nil
	case <-time.After(timeout):
		return 0, fmt.Errorf("%s still running %s after the signal", p.name, timeout)
	}
}

func (p *proc) exitState() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.state == nil {
		return "running"
	}
	return p.state.String()
}

// stop sends SIGTERM and waits up to timeout for the exit code; past it the
// process is killed and an error returned.
func (p *proc) stop(timeout time.Duration) (int, error) {
	p.signal(syscall.SIGTERM)
	code, err := p.waitExit(timeout)
	if err != nil {
		p.signal(syscall.SIGKILL)
		_, _ = p.waitExit(stopTimeout)
	}
	return code, err
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.t.Helper()
	p.signal(syscall.SIGKILL)
	if _, err := p.waitExit(stopTimeout); err != nil {
		p.t.Fatal(err)
	}
}

// restart starts the process again with the same settings and ports.
func (p *proc) restart() {
	p.t.Helper()
	if p.running() {
		p.t.Fatalf("restart %s: still running", p.name)
	}
	p.spawn()
	if err := p.waitReady(readyTimeout); err != nil {
		p.t.Fatalf("restarted %s not ready: %v\n%s", p.name, err, p.logs.tail(40))
	}
}

// freeAddr returns a loopback address with a port free right now.
func freeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// logBuf collects a process's output.
type logBuf struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuf) tail(n int) string {
	lines := strings.Split(strings.TrimRight(b.String(), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// waitFor polls cond until it holds or timeout passes; cond says what it
// saw, for the failure message.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, saw := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s; last saw: %s", timeout, what, saw)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func bg() context.Context { return context.Background() }
