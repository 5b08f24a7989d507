package integration

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The stop, the handover and the start of docs/design.md §9 and §11,
// shown on the built binary and real Redis. Each test logs what it
// measured; the bounds it asserts are functional (generous for a shared
// machine), not performance figures.

// launch starts a process without waiting for it to be ready (start
// does); it gets the same cleanup: SIGTERM, exit 0.
func (s *stack) launch(name, role string, extra map[string]string) *proc {
	s.t.Helper()
	p := &proc{t: s.t, name: name, role: role, Addr: freeAddr(s.t), Work: freeAddr(s.t), logs: &logBuf{}}
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
	s.t.Cleanup(func() {
		if p.running() {
			if code, err := p.stop(stopTimeout); err != nil || code != 0 {
				s.t.Errorf("%s: exit %d %v on SIGTERM, want 0\n%s", p.name, code, err, p.logs.tail(20))
			}
		}
		if s.t.Failed() {
			s.t.Logf("last log lines of %s:\n%s", p.name, p.logs.tail(30))
		}
	})
	return p
}

// allRouted reports whether every journal shard's cursor is at the end of
// its stream (routed's condition, without failing).
func (s *stack) allRouted() (bool, string) {
	j := s.journalLayout()
	for sh := range shards {
		last, err := s.rdb.XRevRangeN(bg(), j.StreamKey(sh), "+", "-", 1).Result()
		if err != nil {
			return false, fmt.Sprintf("shard %d: %v", sh, err)
		}
		if len(last) == 0 {
			continue
		}
		cur, err := s.rdb.Get(bg(), j.Tag(sh)+":cursor").Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return false, fmt.Sprintf("shard %d cursor: %v", sh, err)
		}
		if cur != last[0].ID {
			return false, fmt.Sprintf("shard %d routed up to %q of %s", sh, cur, last[0].ID)
		}
	}
	return true, ""
}

// measure polls cond until it holds or limit passes and returns how long
// after since it held (or limit, with ok false), so that a test can log
// the figure before it asserts its bound.
func measure(since time.Time, limit time.Duration, cond func() (bool, string)) (took time.Duration, ok bool, saw string) {
	for {
		if ok, saw = cond(); ok {
			return time.Since(since), true, ""
		}
		if time.Since(since) > limit {
			return time.Since(since), false, saw
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pushSpread pushes n idle turns of n sessions (subjects spread over the
// journal shards) and fails the test unless each is accepted.
func pushSpread(t *testing.T, s *stack, c *client, tag string, n int) {
	t.Helper()
	for i := range n {
		party := fmt.Sprintf("session:%s-%02d", tag, i)
		tok := s.token(t, party, "default", "events:push")
		if r, err := c.push(tok, ctEvent, idleTurn(fmt.Sprintf("%s-%02d", tag, i), nil)); err != nil || r.Status != 202 {
			t.Fatalf("push %s: %v %v", party, r, err)
		}
	}
}

// twoWorkers starts a gateway and two workers sharing the 16 shards 8/8,
// with a default controller so every push is routed to someone.
func twoWorkers(t *testing.T) (*stack, *client, *proc, *proc) {
	s := newStack(t, nil)
	g := s.start("gateway", "gateway", nil)
	wa := s.start("worker-a", "worker", nil)
	wb := s.start("worker-b", "worker", nil)
	c := s.client(g)
	c.putSettings(t, s.token(t, "human:admin", "default", "admin"), map[string]any{"default_controller": "session:boss22"})
	held := func(p *proc) float64 { n, _ := metric(t, p.Work, "wakegate_route_shards_held"); return n }
	waitFor(t, 30*time.Second, "the two workers sharing the 16 shards 8 and 8", func() (bool, string) {
		a, b := held(wa), held(wb)
		return a == 8 && b == 8, fmt.Sprintf("worker-a %v, worker-b %v", a, b)
	})
	pushSpread(t, s, c, "warm", 16)
	waitFor(t, 20*time.Second, "the warm-up routed", s.allRouted)
	return s, c, wa, wb
}

// TestIdleStopIsPrompt: an idle serve exits 0 soon after SIGTERM, on real
// Redis and on the embedded one.
func TestIdleStopIsPrompt(t *testing.T) {
	t.Parallel()
	for _, embedded := range []bool{false, true} {
		t.Run(map[bool]string{false: "redis", true: "embedded"}[embedded], func(t *testing.T) {
			t.Parallel()
			var s *stack
			if embedded {
				s = newEmbeddedStack(t, nil)
			} else {
				s = newStack(t, nil)
			}
			p := s.start("serve", "serve", nil)
			waitFor(t, 10*time.Second, "serve to take its shards", func() (bool, string) {
				return strings.Contains(p.logs.String(), "shards taken"), ""
			})
			// Let every consumer enter its blocking read.
			_, _, _ = measure(time.Now(), 200*time.Millisecond, func() (bool, string) { return false, "" })
			start := time.Now()
			p.signal(syscall.SIGTERM)
			code, err := p.waitExit(10 * time.Second)
			took := time.Since(start)
			t.Logf("idle serve (%s) exited %d %v after SIGTERM", t.Name(), code, took.Round(time.Millisecond))
			if err != nil || code != 0 || took > 2*time.Second {
				t.Errorf("exit %d (%v) after %v, want 0 well within 2 s\n%s", code, err, took, p.logs.tail(10))
			}
		})
	}
}

// TestHandoverOnSIGTERM: a worker stopped with SIGTERM releases its shard
// leases and leaves the worker set, so its peer routes the events of its
// shards at once (before: they waited out the stopped worker's
// heartbeat, 9.6 s).
func TestHandoverOnSIGTERM(t *testing.T) {
	t.Parallel()
	s, c, wa, wb := twoWorkers(t)
	stopped := time.Now()
	wa.signal(syscall.SIGTERM)
	if code, err := wa.waitExit(stopTimeout); err != nil || code != 0 {
		t.Fatalf("worker-a: exit %d %v on SIGTERM, want 0\n%s", code, err, wa.logs.tail(10))
	}
	exited := time.Since(stopped)
	pushSpread(t, s, c, "after", 32) // on every shard, worker-a's among them
	took, ok, saw := measure(stopped, 30*time.Second, s.allRouted)
	t.Logf("worker-a exited %v after SIGTERM; every shard routed by worker-b %v after it", exited.Round(time.Millisecond), took.Round(time.Millisecond))
	if !ok || took > 3*time.Second {
		t.Errorf("events of the stopped worker's shards routed %v after its SIGTERM (%s), want within about a second", took, saw)
	}
	if n, _ := metric(t, wb.Work, "wakegate_route_shards_held"); n != shards {
		t.Errorf("worker-b holds %v shards, want %d", n, shards)
	}
	if !strings.Contains(wa.logs.String(), "shards handed over") {
		t.Errorf("worker-a did not log its handover")
	}
}

// TestTakeoverAfterSIGKILL: a peer routes a killed worker's shards once
// its 3 s lease has expired (before: 10 s lease, 12 s).
func TestTakeoverAfterSIGKILL(t *testing.T) {
	t.Parallel()
	s, c, wa, wb := twoWorkers(t)
	killed := time.Now()
	wa.kill()
	pushSpread(t, s, c, "after", 32)
	took, ok, saw := measure(killed, 30*time.Second, s.allRouted)
	t.Logf("every shard routed by worker-b %v after worker-a's SIGKILL", took.Round(time.Millisecond))
	if !ok || took > 5*time.Second {
		t.Errorf("events of the killed worker's shards routed %v after its SIGKILL (%s), want within 3 s and some slack", took, saw)
	}
	if n, _ := metric(t, wb.Work, "wakegate_route_shards_held"); n != shards {
		t.Errorf("worker-b holds %v shards, want %d", n, shards)
	}
}

// TestRestartAfterSIGKILLReclaims: a worker killed and started again on
// the same host takes its own identity back (its predecessor's pid is
// dead) and with it its shards, at once, instead of waiting out the
// leases (before: a new random identity, first shard 7.5–10 s after
// start).
func TestRestartAfterSIGKILLReclaims(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	g := s.start("gateway", "gateway", nil)
	w := s.start("worker", "worker", nil)
	c := s.client(g)
	c.putSettings(t, s.token(t, "human:admin", "default", "admin"), map[string]any{"default_controller": "session:boss22"})
	waitFor(t, 20*time.Second, "the worker holding every shard", func() (bool, string) {
		n, _ := metric(t, w.Work, "wakegate_route_shards_held")
		return n == shards, fmt.Sprint(n)
	})
	pushSpread(t, s, c, "warm", 16)
	waitFor(t, 20*time.Second, "the warm-up routed", s.allRouted)
	w.kill()
	pushSpread(t, s, c, "after", 32)
	started := time.Now()
	w.spawn()
	took, ok, saw := measure(started, 30*time.Second, s.allRouted)
	t.Logf("restarted worker routed every shard %v after its start", took.Round(time.Millisecond))
	if !ok || took > 4*time.Second {
		t.Errorf("the restarted worker routed its shards %v after its start (%s), want at once", took, saw)
	}
	if err := w.waitReady(readyTimeout); err != nil {
		t.Error(err)
	}
	if strings.Count(w.logs.String(), `"worker_id":"`) < 2 {
		t.Errorf("the worker did not log its identity")
	}
}

// TestWorkerWaitsForRedis: a worker started while Redis is down does not
// exit; it is unready until Redis answers, then starts and routes.
func TestWorkerWaitsForRedis(t *testing.T) {
	t.Parallel()
	r := startPrivateRedis(t, "everysec")
	s := newFaultStack(t, r, nil)
	r.kill()
	w := s.launch("worker", "worker", nil)
	// Down for a while: the worker stays up, unready, and logs its wait
	// without flooding.
	hc := &http.Client{Timeout: time.Second}
	waitFor(t, 10*time.Second, "the worker's admin listener answering 503", func() (bool, string) {
		if !w.running() {
			t.Fatalf("the worker exited while Redis was down: %s\n%s", w.exitState(), w.logs.tail(10))
		}
		resp, err := hc.Get(w.readyURL())
		if err != nil {
			return false, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusServiceUnavailable, resp.Status
	})
	down := time.Now()
	_, _, _ = measure(down, 3*time.Second, func() (bool, string) {
		if !w.running() {
			t.Fatalf("the worker exited while Redis was down: %s\n%s", w.exitState(), w.logs.tail(10))
		}
		return false, ""
	})
	if n := strings.Count(w.logs.String(), "redis does not answer"); n == 0 || n > 3 {
		t.Errorf("%d waiting lines in about 3 s, want one every few seconds\n%s", n, w.logs.tail(10))
	}
	up := r.restart()
	if err := w.waitReady(readyTimeout); err != nil {
		t.Fatalf("the worker did not become ready once Redis answered: %v", err)
	}
	t.Logf("worker ready %v after Redis started", time.Since(up).Round(time.Millisecond))
	g := s.start("gateway", "gateway", nil)
	c := s.client(g)
	c.putSettings(t, s.token(t, "human:admin", "default", "admin"), map[string]any{"default_controller": "session:boss22"})
	pushSpread(t, s, c, "late", 16)
	waitFor(t, 20*time.Second, "the late events routed", s.allRouted)
}

// rawPost opens a connection to addr and writes a POST /v1/events with
// its headers and the first part of its body; the caller writes the rest
// (or not).
func rawPost(t *testing.T, addr, token string, body []byte, first int) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "POST /v1/events HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n",
		addr, token, ctEvent, len(body))
	if _, err := conn.Write(body[:first]); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the server to read the request's start", func() (bool, string) {
		return serverRead(t, addr, conn.LocalAddr().String())
	})
	return conn
}

// listenerClosed reports whether a new connection to addr is refused
// (the gateway has begun its drain).
func listenerClosed(addr string) (bool, string) {
	conn, err := net.DialTimeout("tcp", addr, 200*time.Millisecond)
	if err != nil {
		return true, ""
	}
	conn.Close()
	return false, "still accepting"
}

// TestInFlightRequestFinishesOnStop: a push whose body is still arriving
// when SIGTERM comes gets its full answer (202) before serve exits 0.
func TestInFlightRequestFinishesOnStop(t *testing.T) {
	t.Parallel()
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	body := idleTurn("inflight-1", nil)
	conn := rawPost(t, p.Addr, s.token(t, "session:inflight", "default", "events:push"), body, len(body)/2)
	p.signal(syscall.SIGTERM)
	waitFor(t, 5*time.Second, "the gateway to stop accepting", func() (bool, string) { return listenerClosed(p.Addr) })
	if _, err := conn.Write(body[len(body)/2:]); err != nil {
		t.Fatalf("the rest of the body: %v", err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("the in-flight push got no answer: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Errorf("the in-flight push answered %s, want 202", resp.Status)
	}
	if code, err := p.waitExit(stopTimeout); err != nil || code != 0 {
		t.Errorf("serve: exit %d %v, want 0", code, err)
	}
}

// TestStalledBodyDoesNotFailTheStop: a client stalled mid-body holds a
// stopping gateway at most until the body deadline (WAKEGATE_BODY_TIMEOUT)
// or the drain bound, and the stop is a normal one: exit 0 (before: 1
// when the drain bound was reached), with one warning when it was.
func TestStalledBodyDoesNotFailTheStop(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		bodyTimeout string
		warnings    int
	}{
		{"drain-bound", "30s", 1}, // the body deadline is past the 10 s drain bound
		{"body-deadline", "1s", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newStack(t, map[string]string{"WAKEGATE_BODY_TIMEOUT": tc.bodyTimeout})
			g := s.start("gateway", "gateway", nil)
			body := idleTurn("stalled-1", nil)
			rawPost(t, g.Addr, s.token(t, "session:stalled", "default", "events:push"), body, 10)
			stopped := time.Now()
			g.signal(syscall.SIGTERM)
			code, err := g.waitExit(stopTimeout)
			t.Logf("gateway with a stalled client exited %d %v after SIGTERM", code, time.Since(stopped).Round(time.Millisecond))
			if err != nil || code != 0 {
				t.Errorf("exit %d %v, want 0\n%s", code, err, g.logs.tail(10))
			}
			if n := strings.Count(g.logs.String(), "drain bound reached"); n != tc.warnings {
				t.Errorf("%d drain warnings, want %d\n%s", n, tc.warnings, g.logs.tail(10))
			}
		})
	}
}
