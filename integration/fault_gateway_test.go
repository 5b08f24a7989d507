package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"sync"
	"syscall"
	"testing"
	"time"
)

// TestFaultGatewayRestart restarts a gateway under a steady load of signed
// deliveries and agent pushes: with four requests in flight — their bodies
// half sent, the gateway's handlers reading them — the gateway gets
// SIGTERM. Its readiness must go off at once, while those four are still
// open; they must then finish with a 2xx once their bodies arrive; the
// process must exit 0; and a new gateway on the same address takes the
// load again. The load sees only 2xx, 503 or a transport error (connection
// refused or reset) — the latter two retried under the same id — and every
// id acknowledged, before, during or after the restart, is in the journal
// exactly once: no 2xx for anything not committed.
func TestFaultGatewayRestart(t *testing.T) {
	t.Parallel()
	s := newStack(t, map[string]string{"WAKEGATE_READY_SETTLE": "1h"})
	g := s.start("gateway", "gateway", nil)
	w := s.start("worker", "worker", nil)
	dumpLogs(t, g, w)
	c := s.client(g)
	load := newFaultLoad(t, s, c, "gwr", 5*time.Millisecond)
	load.start(3, 3)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			load.stop()
		}
	})
	load.waitAcked(t, time.Time{}, 100, 30*time.Second, "a steady load acknowledged before the restart")

	// Four requests in flight: bodies half sent and read by the gateway.
	var slow []*slowRequest
	for i := range 4 {
		if i%2 == 0 {
			id := fmt.Sprintf("gwr-slow-%d", i)
			body := idleTurn(id, map[string]any{"subject": "session:" + id})
			slow = append(slow, startSlow(t, c, "/v1/events", id, body, map[string]string{
				"Content-Type": ctEvent, "Authorization": "Bearer " + load.feeder}))
		} else {
			guid := newGUID()
			body := bytes.ReplaceAll(load.tmpl, []byte(phNumber), []byte(fmt.Sprint(900+i)))
			req := c.webhookRequest("pull_request", guid, body)
			hdr := map[string]string{}
			for k := range req.Header {
				hdr[k] = req.Header.Get(k)
			}
			slow = append(slow, startSlow(t, c, "/webhooks/github", guid, body, hdr))
		}
	}
	for _, sr := range slow {
		waitFor(t, 5*time.Second, "the gateway to read the first half of "+sr.id, func() (bool, string) {
			return serverRead(t, g.Addr, sr.local())
		})
	}

	term := time.Now()
	g.signal(syscall.SIGTERM)
	// Readiness goes off at once, while the four are still in flight.
	hc := &http.Client{Timeout: time.Second}
	waitFor(t, 2*time.Second, "the gateway's /readyz off after SIGTERM", func() (bool, string) {
		resp, err := hc.Get("http://" + g.Addr + "/readyz")
		if err != nil {
			return true, ""
		}
		resp.Body.Close()
		return resp.StatusCode != http.StatusOK, fmt.Sprint(resp.StatusCode)
	})
	off := time.Since(term)
	for _, sr := range slow {
		select {
		case <-sr.done:
			t.Fatalf("%s answered before its body was complete: %v %v", sr.id, sr.resp, sr.err)
		default:
		}
	}
	// The in-flight requests finish.
	for _, sr := range slow {
		sr.finish()
	}
	answered := 0
	for _, sr := range slow {
		select {
		case <-sr.done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: no answer 10s after its body was complete", sr.id)
		}
		if sr.err != nil || sr.resp.Status/100 != 2 {
			t.Errorf("%s in flight at SIGTERM: %v %v, want a 2xx", sr.id, sr.resp, sr.err)
		} else {
			answered++
		}
	}
	code, err := g.waitExit(stopTimeout)
	if err != nil || code != 0 {
		t.Fatalf("gateway after SIGTERM: exit %d, %v; want 0", code, err)
	}
	exited := time.Now()
	t.Logf("SIGTERM: /readyz off after %s; %d of the %d requests in flight answered 2xx; exit 0 %s after the signal",
		off.Round(time.Millisecond), answered, len(slow), exited.Sub(term).Round(time.Millisecond))

	g.restart()
	restarted := time.Now()
	t.Logf("new gateway on the same address ready %s after the old one exited", restarted.Sub(exited).Round(time.Millisecond))
	load.waitAcked(t, restarted, 100, 30*time.Second, "the new gateway taking the load")
	tries, acked := load.snapshot()
	load.stop()
	stopped = true
	for _, f := range load.failures {
		t.Error(f)
	}

	// What the load saw between the signal and the new gateway.
	outcomes := map[string]int{}
	for _, tr := range tries {
		if tr.start.Before(term) || tr.start.After(restarted) {
			continue
		}
		switch {
		case tr.status/100 == 2:
			outcomes["2xx"]++
		case tr.status == http.StatusServiceUnavailable:
			outcomes["503"]++
		case tr.status == 0:
			outcomes["transport error"]++
		default:
			outcomes[fmt.Sprint(tr.status)]++ // load.deliver already failed the test
		}
	}
	t.Logf("attempts sent between SIGTERM and the new gateway: %v", outcomes)
	if outcomes["transport error"]+outcomes["503"] == 0 {
		t.Errorf("no attempt met the restart (refused or 503): the load did not run through it")
	}
	// The four in flight at SIGTERM were acknowledged too.
	load.mu.Lock()
	for _, sr := range slow {
		load.acked[sr.id] = ack{kind: sr.kind, at: exited}
	}
	load.mu.Unlock()
	checkCommitted(t, s, load, faultChecks{})
	t.Logf("load: %d attempts, %d ids acknowledged (%d as duplicates of an attempt cut by the restart)",
		len(tries), len(acked), dupCount(acked))
}

// slowRequest is a POST whose body is sent in two halves: the second only
// when finish is called.
type slowRequest struct {
	id, kind string
	pw       *io.PipeWriter
	rest     []byte
	done     chan struct{}
	resp     *response
	err      error
	mu       sync.Mutex
	addr     string
}

// startSlow sends the headers and the first half of body to path and
// returns once that half has been handed to the connection.
func startSlow(t testing.TB, c *client, path, id string, body []byte, hdr map[string]string) *slowRequest {
	t.Helper()
	kind := kindPush
	if path == "/webhooks/github" {
		kind = kindWebhook
	}
	pr, pw := io.Pipe()
	sr := &slowRequest{id: id, kind: kind, pw: pw, rest: body[len(body)/2:], done: make(chan struct{})}
	trace := &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) {
		sr.mu.Lock()
		sr.addr = i.Conn.LocalAddr().String()
		sr.mu.Unlock()
	}}
	ctx := httptrace.WithClientTrace(context.Background(), trace)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, pr)
	req.ContentLength = int64(len(body))
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	go func() {
		defer close(sr.done)
		resp, err := hc.Do(req)
		if err != nil {
			sr.err = err
			return
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		sr.resp, sr.err = &response{Status: resp.StatusCode, Header: resp.Header, Body: b}, err
		if err == nil && resp.StatusCode/100 == 2 {
			if kind == kindPush {
				var a pushAnswer
				if json.Unmarshal(b, &a) != nil || len(a.Accepted) != 1 || a.Accepted[0].ID != id {
					sr.err = fmt.Errorf("2xx does not acknowledge %s: %s", id, b)
				}
			} else {
				var a deliveryAnswer
				if json.Unmarshal(b, &a) != nil || a.Delivery != id || a.Status != "accepted" {
					sr.err = fmt.Errorf("2xx does not acknowledge %s: %s", id, b)
				}
			}
		}
	}()
	if _, err := pw.Write(body[:len(body)/2]); err != nil {
		t.Fatalf("%s: first half: %v", id, err)
	}
	return sr
}

func (sr *slowRequest) local() string {
	sr.mu.Lock()
	defer sr.mu.Unlock()
	return sr.addr
}

// finish sends the rest of the body.
func (sr *slowRequest) finish() {
	_, _ = sr.pw.Write(sr.rest)
	_ = sr.pw.Close()
}
