package integration

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestGracefulStopWithLongPoll SIGTERMs `serve` while a long-poll GET
// /v1/events?wait=30s is open: the process must exit 0 within 12 s and the
// poll must get an answer (what it has: no events, a cursor) rather than a
// dropped connection.
func TestGracefulStopWithLongPoll(t *testing.T) {
	t.Parallel()
	const bound = 12 * time.Second
	s := newStack(t, nil)
	p := s.start("serve", "serve", nil)
	c := s.client(p)
	op := s.token(t, "human:operator", "default", "events:read events:read:any")

	type answer struct {
		r   *response
		err error
		at  time.Time
	}
	answered := make(chan answer, 1)
	wrote := make(chan struct{})
	var (
		once      sync.Once
		mu        sync.Mutex
		localAddr string
	)
	trace := &httptrace.ClientTrace{
		GotConn: func(i httptrace.GotConnInfo) {
			mu.Lock()
			localAddr = i.Conn.LocalAddr().String()
			mu.Unlock()
		},
		WroteRequest: func(httptrace.WroteRequestInfo) { once.Do(func() { close(wrote) }) },
	}
	ctx, cancel := context.WithTimeout(httptrace.WithClientTrace(context.Background(), trace), 45*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/v1/events?wait=30s", nil)
	req.Header.Set("Authorization", "Bearer "+op)
	go func() {
		r, err := c.do(req)
		answered <- answer{r, err, time.Now()}
	}()
	select {
	case <-wrote:
	case a := <-answered:
		t.Fatalf("the long-poll answered before the stop: %v %v", a.r, a.err)
	case <-time.After(5 * time.Second):
		t.Fatal("the long-poll request was not sent within 5s")
	}
	// The request is written; wait until the server has accepted the
	// connection and read the request (its socket's receive queue is empty),
	// so the stop finds the poll in its handler, not in the listen backlog.
	mu.Lock()
	client := localAddr
	mu.Unlock()
	waitFor(t, 5*time.Second, "the server to read the long-poll request", func() (bool, string) {
		return serverRead(t, p.Addr, client)
	})

	stopped := time.Now()
	p.signal(syscall.SIGTERM)
	code, err := p.waitExit(bound)
	if err != nil {
		p.kill()
		t.Errorf("serve still running %s after SIGTERM with a long-poll open", bound)
	} else if code != 0 {
		t.Errorf("serve exited %d after SIGTERM with a long-poll open (in %s), want 0\n%s", code, time.Since(stopped).Round(time.Millisecond), p.logs.tail(5))
	}

	select {
	case a := <-answered:
		switch {
		case a.err != nil:
			t.Errorf("the long-poll got no answer, the connection failed %s after SIGTERM: %v", a.at.Sub(stopped).Round(time.Millisecond), a.err)
		case a.r.Status != 200:
			t.Errorf("the long-poll answered %s, want 200 with what it has", a.r)
		default:
			var pg page
			a.r.decode(t, &pg)
			if pg.Events == nil || pg.Next == "" {
				t.Errorf("the long-poll answered %s, want {events: [], next: <cursor>}", a.r)
			}
		}
	case <-time.After(2 * time.Second):
		t.Error("the long-poll got no answer by the time serve had stopped")
	}
}

// serverRead reports whether the loopback TCP connection from client to
// server (host:port strings) is established on the server side with
// nothing left unread in its receive queue (Linux /proc/net/tcp).
func serverRead(t testing.TB, server, client string) (bool, string) {
	t.Helper()
	port := func(addr string) string {
		_, p, _ := net.SplitHostPort(addr)
		n, _ := strconv.Atoi(p)
		return fmt.Sprintf("%04X", n)
	}
	sp, cp := port(server), port(client)
	b, err := os.ReadFile("/proc/net/tcp")
	if err != nil {
		t.Fatalf("read /proc/net/tcp: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasSuffix(f[1], ":"+sp) || !strings.HasSuffix(f[2], ":"+cp) {
			continue
		}
		_, rx, _ := strings.Cut(f[4], ":")
		if f[3] == "01" && strings.Trim(rx, "0") == "" {
			return true, ""
		}
		return false, "server socket " + line
	}
	return false, "no server-side socket for " + client
}
