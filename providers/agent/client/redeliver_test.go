package client_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/wakegate/wakegate/integration/stack/stacktest"
	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

// TestRedeliverEventRetryIsIdempotent: an event whose id holds '/' is
// redelivered through the path (%2F); the first attempt's answer is lost
// and the retry, with the same X-Request-Id, gets the first answer as a
// duplicate — the subscriber's inbox gained one redelivered entry, not
// two.
func TestRedeliverEventRetryIsIdempotent(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	ctx := ctxT(t, 30*time.Second)
	sub := newClient(t, g.URL, g.Token("session:sub", "inbox subscribe"))
	if _, err := sub.Subscribe(ctx, client.SubscriptionRequest{Subjects: []string{"session:pusher"}}); err != nil {
		t.Fatal(err)
	}
	pusher := newClient(t, g.URL, g.Token("session:pusher", "events:push"))
	if _, err := pusher.Push(ctx, &event.Event{ID: "q/1", Type: "session.awaiting_input", Summary: "which way?"}); err != nil {
		t.Fatal(err)
	}
	page, err := sub.Inbox(ctx, client.InboxQuery{Wait: 10 * time.Second})
	if err != nil || len(page.Entries) != 1 {
		t.Fatalf("the subscriber's inbox: %+v %v, want the event", page, err)
	}
	if _, err := sub.AckThrough(ctx, page.Next); err != nil {
		t.Fatal(err)
	}

	target, _ := url.Parse(g.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var mu sync.Mutex
	var ids, paths []string
	lost := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		ids, paths = append(ids, r.Header.Get("X-Request-Id")), append(paths, r.URL.EscapedPath())
		first := len(ids) == 1
		mu.Unlock()
		if first { // forward it, then lose the answer
			rec := httptest.NewRecorder()
			proxy.ServeHTTP(rec, r)
			lost = rec.Code
			w.Header().Set("Retry-After", "0")
			http.Error(w, "upstream answer lost", http.StatusServiceUnavailable)
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)

	op := newClient(t, srv.URL, g.Token("human:ops", "operator"))
	res, err := op.RedeliverEvent(ctx, client.EventRedeliveryRequest{ID: "q/1", Source: event.AgentSource("default", "session:pusher")})
	if err != nil {
		t.Fatal(err)
	}
	if lost != http.StatusOK {
		t.Fatalf("the first attempt was answered %d upstream, want 200 (redelivered)", lost)
	}
	mu.Lock()
	if len(ids) != 2 || ids[0] == "" || ids[0] != ids[1] || paths[0] != "/admin/events/q%2F1/redeliver" {
		t.Fatalf("attempts sent X-Request-Id %q to %q; want two with one id, to /admin/events/q%%2F1/redeliver", ids, paths)
	}
	mu.Unlock()
	if !res.Duplicate || res.ID != "q/1" || res.By != "human:ops" || res.RequestID != ids[0] || res.Journaled == "" ||
		len(res.Delivered) != 1 || res.Delivered[0].Party != "session:sub" || !res.Delivered[0].New {
		t.Fatalf("the retry answered %+v, want the first answer (one new entry for session:sub) as a duplicate", res)
	}
	page, err = sub.Inbox(ctx, client.InboxQuery{})
	if err != nil || len(page.Entries) != 1 || !page.Entries[0].Redelivered || page.Entries[0].Seq != res.Delivered[0].InboxSeq {
		t.Fatalf("the subscriber's inbox: %+v %v, want one redelivered entry at %d", page, err, res.Delivered[0].InboxSeq)
	}
}

// TestRedeliverDelivery: a stored delivery the workers derived already is
// re-derived to nothing; an unknown GUID and an unknown event are 404s.
func TestRedeliverDelivery(t *testing.T) {
	t.Parallel()
	g := stacktest.Start(t)
	ctx := ctxT(t, 30*time.Second)
	body, err := os.ReadFile("../../../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		t.Fatal(err)
	}
	guid := "client-" + client.NewID()
	mac := hmac.New(sha256.New, []byte("webhook-secret"))
	mac.Write(body)
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", guid)
	req.Header.Set("X-GitHub-Hook-Installation-Target-ID", "777")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusAccepted {
		t.Fatalf("webhook: %d %s", resp.StatusCode, b)
	}
	op := newClient(t, g.URL, g.Token("human:ops", "operator"))
	reader := newClient(t, g.URL, g.Token("human:ops", allScopes))
	stacktest.Eventually(t, 10*time.Second, "the workers derive the delivery", func() (bool, string) {
		n := len(journaled(t, reader, guid))
		return n == 1, fmt.Sprintf("%d events %s journaled", n, guid)
	})
	// Found by its GUID alone, under the one hook that holds it.
	if found, err := op.RedeliverDelivery(ctx, guid, ""); err != nil || found.Hook != "777" {
		t.Fatalf("without its hook: %+v %v, want found under hook 777", found, err)
	}
	if _, err := op.RedeliverDelivery(ctx, "client-"+client.NewID(), ""); client.StatusOf(err) != http.StatusNotFound {
		t.Fatalf("an unknown delivery: %v, want 404", err)
	}
	res, err := op.RedeliverDelivery(ctx, guid, "777")
	if err != nil {
		t.Fatal(err)
	}
	if res.GUID != guid || res.Hook != "777" || res.Status != "derived" || len(res.Produced) != 0 || res.Journaled == "" || res.By != "human:ops" {
		t.Fatalf("redelivery of a derived delivery: %+v, want nothing produced and a record", res)
	}
	_, err = op.RedeliverEvent(ctx, client.EventRedeliveryRequest{ID: "nope", Source: "//wakegate/default/session:x"})
	var pe *client.Error
	if client.StatusOf(err) != http.StatusNotFound || !errors.As(err, &pe) || !strings.Contains(pe.Detail, "nope") {
		t.Fatalf("unknown event: %v, want a 404 naming it", err)
	}
}
