package tasks

import (
	"fmt"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/inbox"
)

// TestRateCapDigestAtTheNextToken adds the time window to the "ten
// attention events to one recipient within 5 s → exactly 3 wakes, then
// one digest wake at the next token carrying the other 7"
// (TestRateCapFoldsIntoOneDigest checks the counts): the three wakes go
// out at once, and the digest not before the next token (per = 3 s after
// the bucket's first take) and within Asynq's ±2 s of it.
func TestRateCapDigestAtTheNextToken(t *testing.T) {
	const per = 3 * time.Second
	he := newHoldsEnv(t)
	if _, err := he.sup.MergeSettings(he.ctx, ws, []byte(`{"rate":{"per":"3s","burst":3}}`)); err != nil {
		t.Fatal(err)
	}
	rc := newReceiver(t, statuses(200))
	he.endpoint("human:gera", rc.url(), "")
	he.subscribe("human:gera", `{"subjects":["github:org/repo#*"]}`)
	start := time.Now()
	for i := range 10 {
		he.route("github.pull_request.ready", fmt.Sprintf("#%d", 200+i), "", "")
	}
	if d := time.Since(start); d > time.Second {
		t.Fatalf("routing ten events took %v: the window below would not mean much", d)
	}
	eventually(t, 2*time.Second, "three wakes at once", func() bool { return rc.count() >= 3 })
	if rc.count() != 3 {
		t.Fatalf("%d pushes before the next token, want 3", rc.count())
	}
	eventually(t, per+5*time.Second, "the digest", func() bool { return rc.count() >= 4 })
	he.settle(t, rc, 4)
	got := rc.got()
	for _, r := range got[:3] {
		if r.at.Sub(start) > time.Second {
			t.Fatalf("a wake went out %v after its event", r.at.Sub(start))
		}
	}
	at := got[3].at.Sub(start)
	if at < per {
		t.Fatalf("digest %v after the first take, before the next token (%v)", at, per)
	}
	if at > per+2*time.Second+200*time.Millisecond {
		t.Fatalf("digest %v after the first take, want within 2 s of the next token (%v)", at, per)
	}
	if d := bodies(t, rc)[3]; d.Kind != inbox.KindDigest || len(d.Digest) != 7 {
		t.Fatalf("fourth push %+v, want the digest of the other 7", d)
	}
}
