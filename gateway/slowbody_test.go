package gateway

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/wakegate/wakegate/delivery/redistest"
	"github.com/wakegate/wakegate/providers/agent"
)

// slowSender is one connection that sends a request's headers, then its
// body a byte at a time, until the server answers or the test ends.
type slowSender struct {
	conn   net.Conn
	answer chan int // the status the server answered with; 0: the connection ended with none
}

// attackFrom is the client address the slow senders dial from; the
// legitimate requests come from 127.0.0.1, as a second client would.
var attackFrom = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}

// startSlow opens a connection to addr from attackFrom and trickles a
// /webhooks/github body over it: chunked when length < 0, else with that
// Content-Length.
func startSlow(t *testing.T, ctx context.Context, addr string, length int) *slowSender {
	t.Helper()
	d := net.Dialer{LocalAddr: attackFrom, Timeout: 5 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		t.Fatalf("dial from %s: %v", attackFrom, err)
	}
	t.Cleanup(func() { conn.Close() })
	framing := "Transfer-Encoding: chunked"
	if length >= 0 {
		framing = "Content-Length: " + strconv.Itoa(length)
	}
	head := "POST /webhooks/github HTTP/1.1\r\nHost: wakegate\r\nContent-Type: application/json\r\n" +
		"X-GitHub-Event: pull_request\r\nX-GitHub-Delivery: slow\r\nX-Hub-Signature-256: sha256=00\r\n" + framing + "\r\n\r\n"
	if _, err := io.WriteString(conn, head); err != nil {
		t.Fatal(err)
	}
	s := &slowSender{conn: conn, answer: make(chan int, 1)}
	go func() { // a byte every 300 ms, until the connection breaks or the test ends
		piece := []byte("{")
		if length < 0 {
			piece = []byte("1\r\n{\r\n")
		}
		tick := time.NewTicker(300 * time.Millisecond)
		defer tick.Stop()
		for {
			if _, err := conn.Write(piece); err != nil {
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			s.answer <- 0
			return
		}
		resp.Body.Close()
		s.answer <- resp.StatusCode
	}()
	return s
}

// metricValue reads one unlabelled sample from the gateway's /metrics.
func metricValue(t *testing.T, url, name string) float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(name) + ` (\S+)$`).FindSubmatch(b)
	if m == nil {
		t.Fatalf("%s not in /metrics", name)
	}
	v, _ := strconv.ParseFloat(string(m[1]), 64)
	return v
}

// waitFor polls cond until it holds, failing the test after d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting until %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func testPushToken(t *testing.T) string {
	t.Helper()
	c := agent.Claims{Workspace: "default", Scope: "events:push"}
	c.Subject = "session:slowtest"
	c.ExpiresAt = jwt.NewNumericDate(time.Now().Add(time.Hour))
	tok, err := agent.Mint([]byte(testSecret), c)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// legitimate sends a signed webhook and an agent push from 127.0.0.1 and
// returns their statuses and how long each took.
func legitimate(t *testing.T, url, guid string) (hook, push int, tookHook, tookPush time.Duration) {
	t.Helper()
	client := &http.Client{Timeout: 20 * time.Second}
	body := []byte(`{"action":"opened","number":7,"pull_request":{"number":7,"state":"open","head":{"sha":"abc"}},"repository":{"full_name":"acme/app"}}`)
	req := signedDelivery(t, url, body)
	req.Header.Set("X-GitHub-Delivery", guid)
	start := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("signed webhook: %v", err)
	}
	resp.Body.Close()
	hook, tookHook = resp.StatusCode, time.Since(start)

	ev := fmt.Sprintf(`{"specversion":"1.0","id":"%s","source":"harness","type":"session.turn_ended","data":{"idle":true}}`, guid)
	req, _ = http.NewRequest(http.MethodPost, url+"/v1/events", strings.NewReader(ev))
	req.Header.Set("Content-Type", "application/cloudevents+json")
	req.Header.Set("Authorization", "Bearer "+testPushToken(t))
	start = time.Now()
	resp, err = client.Do(req)
	if err != nil {
		t.Fatalf("agent push: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Logf("agent push answered %d %s", resp.StatusCode, b)
	}
	return hook, resp.StatusCode, tookHook, time.Since(start)
}

// TestSlowBodiesDoNotStopIngest (docs/design.md §13: bad input never costs
// another tenant anything): ten chunked connections and one declaring a
// 6 MiB Content-Length, each trickling a byte at a time, hold only the
// bytes they sent; a signed webhook and an agent push from another
// client get 202 while they are open, and the body deadline then ends
// every slow connection with 408.
func TestSlowBodiesDoNotStopIngest(t *testing.T) {
	rdb, prefix := redistest.New(t)
	const bodyTimeout = 12 * time.Second
	srv := newTestServer(t, rdb, prefix, Config{BodyTimeout: bodyTimeout})
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)

	var slow []*slowSender
	for range 10 {
		slow = append(slow, startSlow(t, ctx, addr, -1))
	}
	slow = append(slow, startSlow(t, ctx, addr, 6291456))
	opened := time.Now()
	waitFor(t, 30*time.Second, "the 11 slow bodies are being read", func() bool {
		return metricValue(t, srv.URL, "wakegate_gateway_unfinished_bodies") == 11
	})

	hook, push, tookHook, tookPush := legitimate(t, srv.URL, "d1b8a6f0-0000-4000-8000-000000000001")
	t.Logf("with 11 slow bodies open: webhook %d in %v, push %d in %v", hook, tookHook.Round(time.Millisecond), push, tookPush.Round(time.Millisecond))
	if hook != http.StatusAccepted || push != http.StatusAccepted {
		t.Fatalf("with 11 slow bodies open: webhook %d, agent push %d; want 202 and 202", hook, push)
	}
	if n := metricValue(t, srv.URL, "wakegate_gateway_unfinished_bodies"); n != 11 && time.Since(opened) < bodyTimeout {
		t.Fatalf("%v unfinished bodies after the legitimate requests, want the 11 slow ones still open", n)
	}
	if b := metricValue(t, srv.URL, "wakegate_gateway_inflight_body_bytes"); b > 1<<20 {
		t.Fatalf("%v bytes of budget held by bodies that sent a few bytes each", b)
	}

	// The deadline ends each slow body — with 408, or with the connection
	// reset before the client read it (the server closes a connection
	// whose body it did not finish, and a loaded client may see the reset
	// first) — and nothing is left held.
	for i, s := range slow {
		select {
		case status := <-s.answer:
			if status != http.StatusRequestTimeout && status != 0 {
				t.Fatalf("slow connection %d: answered %d, want 408 or the connection closed", i, status)
			}
		case <-time.After(bodyTimeout + 30*time.Second):
			t.Fatalf("slow connection %d still open %v after it began", i, time.Since(opened))
		}
	}
	waitFor(t, 30*time.Second, "no body is left unfinished", func() bool {
		return metricValue(t, srv.URL, "wakegate_gateway_unfinished_bodies") == 0 &&
			metricValue(t, srv.URL, "wakegate_gateway_inflight_body_bytes") == 0
	})
}

// TestUnfinishedBodiesPerClient: one address holds at most
// BodiesPerClient bodies unfinished; its next one is refused at once with
// 429 and Retry-After, while another address is served.
func TestUnfinishedBodiesPerClient(t *testing.T) {
	rdb, prefix := redistest.New(t)
	srv := newTestServer(t, rdb, prefix, Config{BodiesPerClient: 3})
	addr := strings.TrimPrefix(srv.URL, "http://")
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	for range 3 {
		startSlow(t, ctx, addr, -1)
	}
	waitFor(t, 30*time.Second, "3 slow bodies are being read", func() bool {
		return metricValue(t, srv.URL, "wakegate_gateway_unfinished_bodies") == 3
	})
	d := net.Dialer{LocalAddr: attackFrom}
	client := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{DialContext: d.DialContext}}
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/webhooks/github", bytes.NewReader([]byte(`{}`)))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" ||
		resp.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("a 4th body from the same address: %d (Retry-After %q), want 429 problem+json with Retry-After",
			resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	hook, push, _, _ := legitimate(t, srv.URL, "d1b8a6f0-0000-4000-8000-000000000002")
	if hook != http.StatusAccepted || push != http.StatusAccepted {
		t.Fatalf("another address: webhook %d, agent push %d; want 202 and 202", hook, push)
	}
	if v := metricValue(t, srv.URL, `wakegate_gateway_bodies_refused_total{reason="per_client"}`); v != 1 {
		t.Fatalf("bodies refused per client: %v, want 1", v)
	}
}
