package outbound

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/wakegate/wakegate/delivery/redistest"
)

func TestEndpoints(t *testing.T) {
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	r := &fakeResolver{answers: map[string][][]netip.Addr{"hooks.example": {addrs("93.184.215.14")}}}
	s := NewEndpoints(rdb, prefix, &Guard{Resolver: r})

	ep, created, shown, err := s.Put(ctx, "acme", "human:ops", Put{URL: "https://hooks.example/a"})
	if err != nil || !created || !shown || ep.Format != FormatStandard {
		t.Fatalf("create: %+v created=%v shown=%v err=%v", ep, created, shown, err)
	}
	first := ep.Secret
	if _, err := ParseSecret(first); err != nil {
		t.Fatalf("generated secret %q: %v", first, err)
	}
	// Omitted secret keeps it, and is not shown again.
	ep, created, shown, err = s.Put(ctx, "acme", "human:ops", Put{URL: "https://hooks.example/b", Format: FormatSlack})
	if err != nil || created || shown || ep.Secret != first || ep.URL != "https://hooks.example/b" || ep.Format != FormatSlack {
		t.Fatalf("update: %+v created=%v shown=%v err=%v", ep, created, shown, err)
	}
	// "rotate" makes a fresh one, shown.
	ep, _, shown, err = s.Put(ctx, "acme", "human:ops", Put{URL: "https://hooks.example/b", Secret: SecretRotate})
	if err != nil || !shown || ep.Secret == first {
		t.Fatalf("rotate: %+v shown=%v err=%v", ep, shown, err)
	}
	// A given secret is set.
	given := "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	ep, _, shown, err = s.Put(ctx, "acme", "human:ops", Put{URL: "https://hooks.example/b", Secret: given})
	if err != nil || !shown || ep.Secret != given {
		t.Fatalf("set secret: %+v shown=%v err=%v", ep, shown, err)
	}
	// Bad input writes nothing.
	for _, p := range []Put{{URL: "http://10.0.0.1/"}, {URL: "https://hooks.example/", Format: "xml"},
		{URL: "https://hooks.example/", Secret: "hunter2"}, {URL: "gopher://hooks.example/"}} {
		if _, _, _, err := s.Put(ctx, "acme", "human:ops", p); !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrRefused) {
			t.Errorf("Put(%+v) = %v, want refused", p, err)
		}
	}
	if _, _, _, err := s.Put(ctx, "acme", "robot:x", Put{URL: "https://hooks.example/"}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad party: %v", err)
	}
	got, err := s.Get(ctx, "acme", "human:ops")
	if err != nil || got == nil || got.Secret != given || got.URL != "https://hooks.example/b" || got.Disabled() {
		t.Fatalf("after refused puts: %+v %v", got, err)
	}
	// Workspaces are apart.
	if other, err := s.Get(ctx, "beta", "human:ops"); err != nil || other != nil {
		t.Fatalf("other workspace sees %+v %v", other, err)
	}
	// Disable holds for the URL it was given; a PUT enables again.
	if ok, err := s.Disable(ctx, "acme", "human:ops", "https://hooks.example/old", "410"); err != nil || ok {
		t.Fatalf("disable with a stale URL: %v %v", ok, err)
	}
	if ok, err := s.Disable(ctx, "acme", "human:ops", "https://hooks.example/b", "410"); err != nil || !ok {
		t.Fatalf("disable: %v %v", ok, err)
	}
	if got, _ := s.Get(ctx, "acme", "human:ops"); !got.Disabled() || got.DisabledReason != "410" {
		t.Fatalf("not disabled: %+v", got)
	}
	if ep, _, _, _ = s.Put(ctx, "acme", "human:ops", Put{URL: "https://hooks.example/b"}); ep.Disabled() {
		t.Fatal("PUT did not enable")
	}
	if ok, err := s.Delete(ctx, "acme", "human:ops"); err != nil || !ok {
		t.Fatalf("delete: %v %v", ok, err)
	}
	if ok, _ := s.Delete(ctx, "acme", "human:ops"); ok {
		t.Fatal("deleted twice")
	}
	if got, err := s.Get(ctx, "acme", "human:ops"); err != nil || got != nil {
		t.Fatalf("after delete: %+v %v", got, err)
	}
}

func TestBreaker(t *testing.T) {
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	b := NewBreaker(rdb, prefix, BreakerConfig{OpenFor: 30 * time.Second, ProbeFor: 15 * time.Second})
	now := time.UnixMilli(1_800_000_000_000)
	allow := func(at time.Time) (bool, time.Time) {
		t.Helper()
		ok, wait, err := b.Allow(ctx, "acme", "human:ops", at)
		if err != nil {
			t.Fatal(err)
		}
		return ok, wait
	}
	record := func(at time.Time, success bool) time.Time {
		t.Helper()
		open, err := b.Record(ctx, "acme", "human:ops", success, at)
		if err != nil {
			t.Fatal(err)
		}
		return open
	}
	// Four failures, a success, four more: never five in a row.
	for i := range 4 {
		record(now.Add(time.Duration(i)*time.Second), false)
	}
	record(now.Add(4*time.Second), true)
	for i := range 4 {
		if open := record(now.Add(time.Duration(5+i)*time.Second), false); !open.IsZero() {
			t.Fatalf("opened after %d failures in a row", i+1)
		}
	}
	if ok, _ := allow(now.Add(9 * time.Second)); !ok {
		t.Fatal("closed breaker refused")
	}
	// The fifth in a row opens it for 30 s.
	at := now.Add(10 * time.Second)
	open := record(at, false)
	if !open.Equal(at.Add(30 * time.Second)) {
		t.Fatalf("open until %v, want %v", open, at.Add(30*time.Second))
	}
	if ok, wait := allow(at.Add(29 * time.Second)); ok || !wait.Equal(open) {
		t.Fatalf("open breaker: allowed=%v wait=%v", ok, wait)
	}
	// Half-open: one probe, the others wait for its outcome.
	probeAt := open
	if ok, _ := allow(probeAt); !ok {
		t.Fatal("no probe after the open period")
	}
	if ok, wait := allow(probeAt.Add(time.Second)); ok || !wait.Equal(probeAt.Add(15*time.Second)) {
		t.Fatalf("second attempt during the probe: allowed=%v wait=%v", ok, wait)
	}
	// A failed probe opens it again.
	reopen := record(probeAt.Add(2*time.Second), false)
	if !reopen.Equal(probeAt.Add(32 * time.Second)) {
		t.Fatalf("failed probe: open until %v", reopen)
	}
	if ok, _ := allow(probeAt.Add(3 * time.Second)); ok {
		t.Fatal("allowed after a failed probe")
	}
	// A successful probe closes it.
	if ok, _ := allow(reopen); !ok {
		t.Fatal("no second probe")
	}
	if open := record(reopen.Add(time.Second), true); !open.IsZero() {
		t.Fatal("successful probe left it open")
	}
	if ok, _ := allow(reopen.Add(2 * time.Second)); !ok {
		t.Fatal("closed breaker refused")
	}
}

// TestBreakerRatio: at least 70 % failures of at least 10 attempts in the
// window open it, even with no five in a row.
func TestBreakerRatio(t *testing.T) {
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	b := NewBreaker(rdb, prefix, BreakerConfig{})
	now := time.UnixMilli(1_800_000_000_000)
	// f f f s f f f s f f: 8 of 10 failed, at most 3 in a row.
	var open time.Time
	for i, c := range "fffsfffsff" {
		var err error
		open, err = b.Record(ctx, "acme", "session:a", c == 's', now.Add(time.Duration(i)*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		if i < 9 && !open.IsZero() {
			t.Fatalf("opened after %d attempts", i+1)
		}
	}
	if open.IsZero() {
		t.Fatal("80 % failures of 10 attempts did not open it")
	}
	// Outside the window the old attempts do not count.
	b2 := NewBreaker(rdb, prefix+"x", BreakerConfig{})
	for i, c := range "fffsfffsff" {
		at := now.Add(time.Duration(i) * time.Minute) // 9 min: most fall out of the 5 min window
		if open, _ := b2.Record(ctx, "acme", "session:a", c == 's', at); !open.IsZero() {
			t.Fatalf("opened on attempts outside the window (attempt %d)", i+1)
		}
	}
}

func TestDeadLetters(t *testing.T) {
	rdb, prefix := redistest.New(t)
	ctx := context.Background()
	s := NewDeadLetters(rdb, prefix, 3)
	now := time.UnixMilli(1_800_000_000_000).UTC()
	for i := range 5 {
		if err := s.Put(ctx, DeadLetter{ID: fmt.Sprintf("msg_%d", i), Workspace: "acme", Party: "human:ops", Seq: int64(i),
			Body: `{"n":1}`, DeadAt: now.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
	}
	ds, total, err := s.List(ctx, 10)
	if err != nil || total != 3 || len(ds) != 3 || ds[0].ID != "msg_4" || ds[2].ID != "msg_2" {
		t.Fatalf("List = %+v total %d err %v, want the newest 3", ds, total, err)
	}
	if _, err := s.Get(ctx, "msg_0"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("oldest kept past the cap: %v", err)
	}
	d, err := s.Get(ctx, "msg_3")
	if err != nil || d.Seq != 3 || d.Body != `{"n":1}` || !d.DeadAt.Equal(now.Add(3*time.Second)) {
		t.Fatalf("Get = %+v %v", d, err)
	}
	if ok, err := s.Remove(ctx, "msg_3"); err != nil || !ok {
		t.Fatalf("Remove = %v %v", ok, err)
	}
	if ds, total, _ := s.List(ctx, 1); total != 2 || len(ds) != 1 || ds[0].ID != "msg_4" {
		t.Fatalf("after remove: %+v %d", ds, total)
	}
}
