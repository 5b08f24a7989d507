package main

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/integration/stack/stacktest"
	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

// TestRedeliverCommand runs wakegate redeliver against a real gateway: an
// acked event redelivered to its recipient (a table, then --party with
// --json) lands again in its inbox marked redelivered; a stored delivery
// the workers derived already is re-derived to nothing; unknown, refused
// and bad input exit 1 or 2.
func TestRedeliverCommand(t *testing.T) {
	g := stacktest.Start(t)
	op := g.Token("human:ops", "operator")
	sub := apiClient(t, g.URL, g.Token("session:sub", "inbox subscribe"))
	if _, err := sub.Subscribe(bg(t), client.SubscriptionRequest{Subjects: []string{"session:pusher"}}); err != nil {
		t.Fatal(err)
	}
	pusher := apiClient(t, g.URL, g.Token("session:pusher", "events:push"))
	if _, err := pusher.Push(bg(t), &event.Event{ID: "cli/1", Type: "session.awaiting_input", Summary: "which way?"}); err != nil {
		t.Fatal(err)
	}
	ackAll := func() {
		t.Helper()
		es := waitEntries(t, sub, 1)
		if _, err := sub.AckThrough(bg(t), es[0].Seq); err != nil {
			t.Fatal(err)
		}
	}
	ackAll()
	source := event.AgentSource("default", "session:pusher")

	out := mustCLI(t, g.URL, op, "redeliver", "event", "cli/1", "--source", source)
	if !strings.Contains(out, "session.awaiting_input cli/1 about session:pusher: redelivered to 1 party") ||
		!strings.Contains(out, "recorded as wakegate.redelivered at ") {
		t.Fatalf("redeliver event:\n%s", out)
	}
	table := out[strings.Index(out, "PARTY"):strings.Index(out, "recorded as")]
	checkAligned(t, table, []string{"PARTY", "VIA", "INBOX SEQ", "KIND", "WAKE"})
	if !strings.Contains(table, "session:sub") || !strings.Contains(table, "subscription") {
		t.Fatalf("redeliver event table:\n%s", table)
	}
	if es := waitEntries(t, sub, 1); !es[0].Redelivered {
		t.Fatalf("the entry is not marked redelivered: %+v", es[0])
	}
	ackAll()

	var r client.EventRedelivery
	out = mustCLI(t, g.URL, op, "redeliver", "event", "cli/1", "--source", source, "--party", "session:sub", "--json")
	if err := json.Unmarshal([]byte(out), &r); err != nil || r.Party != "session:sub" || len(r.Delivered) != 1 ||
		r.Delivered[0].Party != "session:sub" || r.By != "human:ops" || r.Journaled == "" {
		t.Fatalf("redeliver event --json: %v\n%s", err, out)
	}
	if es := waitEntries(t, sub, 1); !es[0].Redelivered || es[0].Seq != r.Delivered[0].InboxSeq {
		t.Fatalf("the entry %+v is not the redelivery at %d", es[0], r.Delivered[0].InboxSeq)
	}

	// A delivery the workers derived: nothing was missing.
	body, err := os.ReadFile("../../testdata/github/octokit/pull_request/opened.payload.json")
	if err != nil {
		t.Fatal(err)
	}
	guid := "cli-" + client.NewID()
	mac := hmac.New(sha256.New, []byte("webhook-secret"))
	mac.Write(body)
	req, _ := http.NewRequest(http.MethodPost, g.URL+"/webhooks/github", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-GitHub-Event", "pull_request")
	req.Header.Set("X-GitHub-Delivery", guid)
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
	reader := apiClient(t, g.URL, g.Token("human:ops", "events:read events:read:any"))
	stacktest.Eventually(t, 10*time.Second, "the workers derive the delivery", func() (bool, string) {
		page, err := reader.Events(bg(t), client.EventsQuery{Types: []string{"github.pull_request.opened"}, Limit: 1000})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range page.Events {
			if e.ID == guid {
				return true, ""
			}
		}
		return false, "not journaled yet"
	})
	out = mustCLI(t, g.URL, op, "redeliver", "delivery", guid)
	if !strings.Contains(out, "delivery "+guid+" (pull_request of Codertocat/Hello-World): nothing was missing") {
		t.Fatalf("redeliver delivery:\n%s", out)
	}
	var d client.DeliveryRedelivery
	out = mustCLI(t, g.URL, op, "redeliver", "delivery", guid, "--hook", "0", "--json")
	if err := json.Unmarshal([]byte(out), &d); err != nil || d.GUID != guid || d.Status != "derived" || len(d.Produced) != 0 || d.Journaled == "" {
		t.Fatalf("redeliver delivery --json: %v\n%s", err, out)
	}

	for _, c := range []struct {
		args   []string
		token  string
		code   int
		stderr string
	}{
		{[]string{"redeliver", "delivery", "no-such-guid"}, op, 1, "404"},
		{[]string{"redeliver", "event", "nope", "--source", source}, op, 1, "404"},
		{[]string{"redeliver", "event", "cli/1", "--source", source}, g.Token("human:alice", "admin"), 1, "403"},
		{[]string{"redeliver"}, op, 2, "want delivery GUID"},
		{[]string{"redeliver", "bogus"}, op, 2, "unknown redeliver target"},
		{[]string{"redeliver", "event", "cli/1"}, op, 2, "--source is required"},
		{[]string{"redeliver", "event", "cli/1", "--source", source, "--party", "robot:x"}, op, 2, "--party"},
		{[]string{"redeliver", "delivery", guid, "--hook", "abc"}, op, 2, "--hook"},
		{[]string{"redeliver", "delivery"}, op, 2, "want one delivery GUID"},
	} {
		code, out, errs := cliRun(t, g.URL, c.token, c.args...)
		if code != c.code || !strings.Contains(errs, c.stderr) || strings.Count(errs, "\n") != 1 {
			t.Errorf("wakegate %s: exit %d, stderr %q, stdout %q; want exit %d and one line with %q",
				strings.Join(c.args, " "), code, errs, out, c.code, c.stderr)
		}
	}
	if code, _, errs := cliRun(t, g.URL, op, "redeliver", "--help"); code != 0 || !strings.Contains(errs, "wakegate redeliver delivery GUID") {
		t.Errorf("redeliver --help: exit %d\n%s", code, errs)
	}
}
