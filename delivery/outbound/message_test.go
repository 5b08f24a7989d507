package outbound

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
)

func TestWebhookID(t *testing.T) {
	a := WebhookID("wg", "acme", "human:ops", 7)
	if a != WebhookID("wg", "acme", "human:ops", 7) {
		t.Fatal("not deterministic")
	}
	for _, other := range []string{WebhookID("wg", "acme", "human:ops", 8), WebhookID("wg", "acme", "human:dev", 7),
		WebhookID("wg", "beta", "human:ops", 7), WebhookID("wg2", "acme", "human:ops", 7)} {
		if other == a {
			t.Fatalf("%s collides", other)
		}
	}
	if !strings.HasPrefix(a, "msg_") || strings.Contains(a, ".") || len(a) != 36 {
		t.Fatalf("webhook id %q", a)
	}
}

func TestRender(t *testing.T) {
	ev := json.RawMessage(`{"specversion":"1.0","id":"e1","type":"github.pull_request.checks_failed"}`)
	entry := &inbox.Entry{Seq: 3, Type: "github.pull_request.checks_failed", Subject: "github:org/repo#12", Count: 2,
		Priority: "attention", Kind: "wake", Summary: "checks failed <on> main & dev", FirstAt: time.Unix(0, 0).UTC(),
		LastAt: time.Unix(0, 0).UTC(), Event: ev, Latest: ev, Settings: json.RawMessage(`{"secretish":1}`)}
	m := Message{WebhookID: "msg_x", Kind: "wake", Party: "human:ops", Entry: entry, Event: ev}
	b, err := Render(FormatStandard, m)
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(b, &got); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"webhook_id", "kind", "party", "entry", "event"} {
		if got[k] == nil {
			t.Errorf("standard body lacks %q: %s", k, b)
		}
	}
	if strings.Contains(string(b), "secretish") || !strings.HasPrefix(string(b), `{"webhook_id":"msg_x","kind":"wake","party":"human:ops",`) {
		t.Errorf("standard body %s", b)
	}
	again, _ := Render(FormatStandard, m)
	if string(again) != string(b) {
		t.Error("rendering is not stable")
	}
	s, err := Render(FormatSlack, m)
	if err != nil {
		t.Fatal(err)
	}
	var slack struct{ Text string }
	if err := json.Unmarshal(s, &slack); err != nil || !strings.Contains(slack.Text, "Wake for human:ops") ||
		!strings.Contains(slack.Text, "&lt;on&gt; main &amp; dev") || !strings.Contains(slack.Text, "(×2)") {
		t.Errorf("slack body %s (%v)", s, err)
	}
	d, _ := Render(FormatSlack, Message{Kind: "digest", Party: "human:ops", Digest: []inbox.Entry{*entry, *entry}})
	if !strings.Contains(string(d), "2 entries") {
		t.Errorf("slack digest %s", d)
	}
	if _, err := Render("xml", m); err == nil {
		t.Error("unknown format rendered")
	}
}
