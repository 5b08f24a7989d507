package tracker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/wakegate/wakegate/providers/github"
)

// Item is one delivery for ApplyBatch: what Apply takes.
type Item struct {
	Workspace string
	GUID      string
	Fact      *github.Fact
}

// ErrNotBatched wraps ApplyBatch's error for an item whose batch script
// failed (Redis away, a script error): it may or may not have been folded
// in; apply it again with Apply, which is idempotent.
var ErrNotBatched = errors.New("tracker: batch not applied")

// maxBatch bounds the facts of one script call, so one call holds Redis
// for a few milliseconds at most.
const maxBatch = 128

// ApplyBatch folds deliveries in as Apply would, one after the other in
// the order given, with one script call per journal shard they touch
// (shards run concurrently) instead of one per delivery. It returns one
// error per item: nil when it was folded in (or had nothing to do), an
// error wrapping ErrInvalidFact when Apply would refuse it (nothing
// written; the other items still run), or one wrapping ErrNotBatched.
//
// Within a shard the items folded in are always a prefix of that shard's
// items in order: a failure leaves the failed item and every later item of
// its shard ErrNotBatched, so a caller that re-applies those in order keeps
// every subject's order.
func (t *Tracker) ApplyBatch(ctx context.Context, items []Item, now time.Time) []error {
	errs := make([]error, len(items))
	groups := map[int][]batchFact{}
	var shards []int
	stopped := map[int]bool{} // shards whose later items wait: an input could not be read
	for i, it := range items {
		f := it.Fact
		if f == nil || f.Ignored != "" || (f.Type == "" && f.PR == nil && f.Check == nil && f.Review == nil) {
			continue
		}
		shard := t.shardOf(f.Repo)
		if f.Repo == "" {
			shard = t.j.ShardOf(it.Workspace, f.Subject)
		}
		if stopped[shard] {
			errs[i] = fmt.Errorf("apply %s delivery %s: an earlier item of its shard failed: %w", f.Event, it.GUID, ErrNotBatched)
			continue
		}
		in, data, err := t.applyInput(ctx, it.Workspace, it.GUID, f, now)
		if err != nil && !errors.Is(err, ErrInvalidFact) {
			stopped[shard] = true // a read failed (the trailer's session): keep the shard's order
			err = fmt.Errorf("%w: %w", ErrNotBatched, err)
		}
		if err != nil {
			errs[i] = fmt.Errorf("apply %s delivery %s: %w", f.Event, it.GUID, err)
			continue
		}
		var hint []string
		if f.PR != nil {
			hint = []string{f.PR.Base}
		}
		if _, ok := groups[shard]; !ok {
			shards = append(shards, shard)
		}
		groups[shard] = append(groups[shard], batchFact{item: i, in: in, data: data, repo: f.Repo, hint: hint})
	}
	var wg sync.WaitGroup
	for _, shard := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			t.runBatch(ctx, shard, groups[shard], errs)
		}()
	}
	wg.Wait()
	return errs
}

type batchFact struct {
	item int
	in   *applyInput
	data string
	repo string
	hint []string
}

// runBatch folds one shard's facts in, in order, maxBatch per call; on a
// "need" it adds the base's required checks and goes on from that fact.
func (t *Tracker) runBatch(ctx context.Context, shard int, facts []batchFact, errs []error) {
	for _, f := range facts {
		t.remember(f.repo, f.hint)
	}
	needs := 0
	for len(facts) > 0 {
		chunk := facts[:min(len(facts), maxBatch)]
		argv := append(t.j.AppendArgs(), t.j.Tag(shard), len(chunk))
		ctxs := map[string]string{}  // the context per repository, once per call
		buf := make([]byte, 0, 1024) // each input's JSON, copied into argv
		for _, f := range chunk {
			sc, ok := ctxs[f.repo]
			if !ok {
				c := f.in.scriptCtx
				c.Req = t.required(f.repo)
				b, err := json.Marshal(c)
				if err != nil { // cannot happen: strings, numbers and slices
					failBatch(errs, facts, fmt.Errorf("encode input: %w", err))
					return
				}
				sc = string(b)
				ctxs[f.repo] = sc
			}
			in := *f.in
			in.scriptCtx = scriptCtx{} // passed beside it
			buf, _ = appendInput(buf[:0], &in)
			argv = append(argv, sc, string(buf), f.data)
		}
		res, err := batchScript.Run(ctx, t.rdb, []string{t.j.StreamKey(shard)}, argv...).Slice()
		if err != nil {
			failBatch(errs, facts, err)
			return
		}
		done, need := 0, false
		for _, r := range res {
			reply, _ := r.([]any)
			if len(reply) == 0 {
				break
			}
			if status, _ := reply[0].(string); status == "need" {
				t.rememberNeed(facts[done].repo, reply)
				need = true
				break
			}
			done++
		}
		switch {
		case !need && done < len(chunk):
			failBatch(errs, facts[done:], errors.New("short script reply"))
			return
		case done > 0:
			needs = 0
		default:
			if needs++; needs >= maxNeed {
				failBatch(errs, facts, errors.New("required checks still missing after retries"))
				return
			}
		}
		facts = facts[done:]
	}
}

// failBatch marks facts not applied by the batch.
func failBatch(errs []error, facts []batchFact, err error) {
	for _, f := range facts {
		errs[f.item] = fmt.Errorf("%w: delivery %s: %w", ErrNotBatched, f.in.GUID, err)
	}
}
