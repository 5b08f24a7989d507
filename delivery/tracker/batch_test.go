package tracker_test

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/tracker"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/github"
)

// scenario is a run of deliveries over two PRs of e.repo and one PR of a
// second repository, with required checks to learn along the way (base
// "main" requires build; "release" is met for the first time mid-run), a
// status reaching its PR through the sha index, reviews, a push, a
// failure, a close and an invalid fact.
func scenario(e *env, other string) []tracker.Item {
	guid := 0
	item := func(f *github.Fact) tracker.Item {
		guid++
		return tracker.Item{Workspace: e.ws, GUID: "g" + string(rune('a'+guid/26)) + string(rune('a'+guid%26)), Fact: f}
	}
	release := func(p *github.PRFact) { p.Base = "release" }
	bad := e.run(shaA, "ci", "maybe", at(3))
	o := *e
	o.repo = other
	items := []tracker.Item{
		item(e.pr("opened", 1, shaA, at(0))),
		item(e.run(shaA, "build", github.ResultPending, at(1), 1)),
		item(o.pr("opened", 7, shaC, at(1))),
		item(e.check("check_suite", shaA, "100", github.ResultPass, at(2), 1)),
		item(bad),
		item(e.check("status", shaA, "lint", github.ResultPass, at(3))),
		item(e.pr("opened", 2, shaB, at(4), release)),
		item(e.review(1, "alice", "changes_requested", at(5))),
		item(e.run(shaA, "build", github.ResultPass, at(6), 1)),
		item(o.run(shaC, "build", github.ResultPass, at(6), 7)),
		item(e.review(1, "alice", "approved", at(7))),
		item(e.run(shaB, "build", github.ResultFail, at(8), 2)),
		item(e.pr("synchronize", 1, shaC, at(9))),
		item(e.run(shaC, "build", github.ResultPass, at(10))),
		item(e.pr("closed", 2, shaB, at(11), release)),
		item(&github.Fact{Event: "ping", Ignored: "ping"}),
	}
	return items
}

func requireBuildOnMain(repo, base string) []string {
	switch base {
	case "main":
		return []string{"build"}
	case "release":
		return []string{"build", "sign"}
	}
	return nil
}

// TestApplyBatchSameAsOneByOne folds the same deliveries in one batch and
// one by one, on two prefixes: the journals and the trackers must agree.
func TestApplyBatchSameAsOneByOne(t *testing.T) {
	cfg := tracker.Config{Required: requireBuildOnMain}
	one, batch := newEnv(t, cfg), newEnv(t, cfg)
	batch.repo, batch.now = one.repo, one.now
	other := one.repo + "-other"
	oneItems, batchItems := scenario(one, other), scenario(batch, other)

	var oneErrs []error
	for _, it := range oneItems {
		_, err := one.tr.Apply(one.ctx, it.Workspace, it.GUID, it.Fact, one.now)
		oneErrs = append(oneErrs, err)
	}
	batchErrs := batch.tr.ApplyBatch(batch.ctx, batchItems, batch.now)
	for i := range oneItems {
		if (oneErrs[i] == nil) != (batchErrs[i] == nil) || errors.Is(oneErrs[i], tracker.ErrInvalidFact) != errors.Is(batchErrs[i], tracker.ErrInvalidFact) {
			t.Errorf("item %d: one by one %v, batch %v", i, oneErrs[i], batchErrs[i])
		}
	}
	if !errors.Is(batchErrs[4], tracker.ErrInvalidFact) {
		t.Errorf("invalid fact: %v", batchErrs[4])
	}
	// Per subject, in journal order (shards interleave differently).
	bySubject := func(evs []*event.Event) map[string][]event.Event {
		out := map[string][]event.Event{}
		for _, ev := range evs {
			c := *ev
			c.Seq = ""
			out[ev.Subject] = append(out[ev.Subject], c)
		}
		return out
	}
	gotEvs, wantEvs := batch.events(), one.events()
	if len(wantEvs) < 10 {
		t.Fatalf("only %d events one by one: the scenario is too thin", len(wantEvs))
	}
	if got, want := bySubject(gotEvs), bySubject(wantEvs); !reflect.DeepEqual(got, want) {
		t.Errorf("batch journaled %v, one by one %v", ids(gotEvs), ids(wantEvs))
	}
	for _, n := range []int{1, 2} {
		if g, w := batch.state(n), one.state(n); !reflect.DeepEqual(g, w) {
			t.Errorf("PR %d: batch %+v, one by one %+v", n, g, w)
		}
	}
	// Applying the batch again appends nothing.
	before := len(batch.events())
	for i, err := range batch.tr.ApplyBatch(batch.ctx, batchItems, batch.now) {
		if err != nil && !errors.Is(err, tracker.ErrInvalidFact) {
			t.Errorf("item %d again: %v", i, err)
		}
	}
	if after := len(batch.events()); after != before {
		t.Errorf("%d events after re-applying the batch, %d before", after, before)
	}
	if len(one.ofType("github.pull_request.ready")) == 0 {
		t.Error("no ready in the scenario")
	}
}

// TestApplyBatchFailureLeavesAnOrderedRest: when the script cannot run,
// every item of the shard comes back ErrNotBatched, so re-applying them in
// order keeps each subject's order.
func TestApplyBatchFailureLeavesAnOrderedRest(t *testing.T) {
	e := newEnv(t, tracker.Config{})
	items := []tracker.Item{
		{Workspace: e.ws, GUID: "g1", Fact: e.pr("opened", 1, shaA, at(0))},
		{Workspace: e.ws, GUID: "g2", Fact: e.run(shaA, "ci", github.ResultPass, at(1), 1)},
	}
	ctx, cancel := contextWithCancel(e)
	cancel()
	for i, err := range e.tr.ApplyBatch(ctx, items, e.now) {
		if !errors.Is(err, tracker.ErrNotBatched) {
			t.Errorf("item %d: %v, want ErrNotBatched", i, err)
		}
	}
	for i, err := range e.tr.ApplyBatch(e.ctx, items, e.now) {
		if err != nil {
			t.Errorf("item %d: %v", i, err)
		}
	}
	e.wantCount("github.pull_request.ready", 1)
}

// TestApplyBatchLearnsRequiredChecksMidBatch: a fresh process meets a
// PR's base only through the stored tracker, in the middle of a batch: the
// script stops there ("need"), and the batch goes on from that fact with
// the base's required checks.
func TestApplyBatchLearnsRequiredChecksMidBatch(t *testing.T) {
	e := newEnv(t, tracker.Config{Required: requireBuildOnMain})
	release := func(p *github.PRFact) { p.Base = "release" }
	e.apply(e.pr("opened", 3, shaA, at(0), release))
	fresh := tracker.New(e.rdb, e.j, tracker.Config{Required: requireBuildOnMain})
	var calls atomic.Int64
	e.rdb.AddHook(countCalls{&calls})
	items := []tracker.Item{
		{Workspace: e.ws, GUID: "g1", Fact: e.run(shaA, "lint", github.ResultPass, at(1), 3)},
		{Workspace: e.ws, GUID: "g2", Fact: e.run(shaA, "build", github.ResultPass, at(2), 3)},
		{Workspace: e.ws, GUID: "g3", Fact: e.run(shaA, "sign", github.ResultPass, at(3), 3)},
	}
	for i, err := range fresh.ApplyBatch(e.ctx, items, e.now) {
		if err != nil {
			t.Errorf("item %d: %v", i, err)
		}
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("%d script calls, want 2 (need, then the three facts)", n)
	}
	e.wantCount("github.check_run.completed", 3)
	// build alone would have made it ready had "release" been taken for a
	// base with no required checks.
	ready := e.wantCount("github.pull_request.ready", 1)
	evs := e.events()
	if evs[len(evs)-1].ID != ready[0].ID {
		t.Errorf("ready is not last: %v", ids(evs))
	}
}

// countCalls counts the commands that ran (a pipeline counts once); a
// NOSCRIPT answer (the script not yet loaded, then sent whole) does not.
type countCalls struct{ n *atomic.Int64 }

func (h countCalls) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h countCalls) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil || !strings.HasPrefix(err.Error(), "NOSCRIPT") {
			h.n.Add(1)
		}
		return err
	}
}

func (h countCalls) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { h.n.Add(1); return next(ctx, cmds) }
}
