// Package stacktest runs a real wakegate for the tests of the client
// (providers/agent/client) and of the CLI built on it: the stack as serve
// assembles it (package stack) on the test Redis (delivery/redistest) under a
// fresh prefix, its workers running, and a gateway listening on a
// loopback port. It is for tests only: it imports the whole server.
package stacktest

import (
	"context"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/gateway"
	"github.com/wakegate/wakegate/integration/stack"
	"github.com/wakegate/wakegate/providers/agent"
)

// Secret signs the tokens the gateway accepts.
const Secret = "stacktest-secret"

// Gateway is a running wakegate.
type Gateway struct {
	URL   string // http://127.0.0.1:<port>
	Addr  string // 127.0.0.1:<port>
	Stack *stack.Stack

	t      testing.TB
	rdb    redis.UniversalClient
	prefix string

	mu   sync.Mutex
	stop context.CancelFunc // the current gateway's
	done chan struct{}
}

// Start runs a gateway and the workers on the test Redis; both stop when
// the test ends.
func Start(t testing.TB) *Gateway {
	t.Helper()
	rdb, prefix := redistest.New(t)
	st := newStack(t, rdb, prefix)
	components, _ := st.Workers()
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range components {
		wg.Add(1)
		go func() { defer wg.Done(); _ = run(ctx) }()
	}
	g := &Gateway{Stack: st, t: t, rdb: rdb, prefix: prefix}
	t.Cleanup(func() {
		g.Stop()
		cancel()
		wg.Wait()
	})
	g.serve(st, "127.0.0.1:0")
	return g
}

func newStack(t testing.TB, rdb redis.UniversalClient, prefix string) *stack.Stack {
	t.Helper()
	st, err := stack.New(rdb, stack.Config{Prefix: prefix, Shards: 4}, slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// serve starts a gateway of st on addr and waits until it listens.
func (g *Gateway) serve(st *stack.Stack, addr string) {
	g.t.Helper()
	v, err := agent.NewVerifier(agent.VerifierConfig{HS256Secret: []byte(Secret)})
	if err != nil {
		g.t.Fatal(err)
	}
	gw, err := st.Gateway(gateway.Config{Addr: addr, WebhookSecrets: [][]byte{[]byte("webhook-secret")},
		TokenSecret: []byte(Secret)}, v, nil)
	if err != nil {
		g.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	errc := make(chan error, 1)
	go func() { defer close(done); errc <- gw.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for gw.Addr() == "" {
		select {
		case err := <-errc:
			cancel()
			g.t.Fatalf("gateway on %s: %v", addr, err)
		default:
		}
		if time.Now().After(deadline) {
			cancel()
			g.t.Fatalf("gateway on %s did not listen within 10 s", addr)
		}
		time.Sleep(5 * time.Millisecond)
	}
	g.mu.Lock()
	g.stop, g.done = cancel, done
	g.Addr, g.URL = gw.Addr(), "http://"+gw.Addr()
	g.mu.Unlock()
}

// Stop stops the gateway (as SIGTERM would: open long-polls answer, then
// the listener closes); the workers keep running. Stopping twice is a
// no-op.
func (g *Gateway) Stop() {
	g.mu.Lock()
	stop, done := g.stop, g.done
	g.stop, g.done = nil, nil
	g.mu.Unlock()
	if stop != nil {
		stop()
		<-done
	}
}

// Restart starts a new gateway process's worth of state (a fresh stack on
// the same Redis and prefix, as another process would build) on the
// stopped gateway's address.
func (g *Gateway) Restart() {
	g.t.Helper()
	g.Stop()
	g.serve(newStack(g.t, g.rdb, g.prefix), g.Addr)
}

// Token mints a token of the workspace "default" for party with scope.
func (g *Gateway) Token(party, scope string) string {
	g.t.Helper()
	return Token(g.t, party, scope, time.Hour)
}

// Token mints a token of the workspace "default" signed with Secret.
func Token(t testing.TB, party, scope string, ttl time.Duration) string {
	t.Helper()
	c := agent.Claims{Workspace: "default", Scope: scope}
	c.Subject = party
	c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(ttl))
	tok, err := agent.Mint([]byte(Secret), c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// FreeAddr returns a loopback address nothing listens on (for a gateway
// that is down).
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

// Hanging is a server that accepts connections and never answers, until
// the test ends.
func Hanging(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c) // read nothing, answer nothing
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return "http://" + ln.Addr().String()
}

// Eventually polls cond every 20 ms until it holds or timeout passes, then
// fails the test with what cond last said.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, last := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s; last: %s", what, timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
