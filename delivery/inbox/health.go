package inbox

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// What the health sweep (workers/health) reads of inboxes without listing
// them: cheap counters that tell whether a recipient's inbox changed, and
// what a delivery decided, from its dedup marker.

// Counts are three counters of one recipient's inbox: together they change
// whenever an entry is delivered, folded, acked or its escalation is
// checked.
type Counts struct {
	Last    int64 // the last seq assigned (every delivery takes one)
	Unacked int64 // unacked entries
	Armed   int64 // entries armed for an escalation check (EscalationKey)
}

// CountsOf reads the Counts of each of parties of workspace in one
// pipeline, in order.
func (b *Inbox) CountsOf(ctx context.Context, workspace string, parties []string) ([]Counts, error) {
	out := make([]Counts, len(parties))
	if len(parties) == 0 {
		return out, nil
	}
	type cmds struct {
		last          *redis.StringCmd
		unacked, armd *redis.IntCmd
	}
	cs := make([]cmds, len(parties))
	pipe := b.rdb.Pipeline()
	for i, p := range parties {
		if err := checkRecipient(workspace, p); err != nil {
			return nil, err
		}
		k := b.keysOf(workspace, p)
		cs[i] = cmds{pipe.Get(ctx, k.last), pipe.ZCard(ctx, k.unacked), pipe.ZCard(ctx, k.esc)}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("inbox counts: %w", err)
	}
	for i, c := range cs {
		last, err := c.last.Int64()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("inbox counts of %s: %w", parties[i], err)
		}
		out[i] = Counts{Last: last, Unacked: c.unacked.Val(), Armed: c.armd.Val()}
	}
	return out, nil
}

// DeliveryKey names the delivery of one event (Source, ID) to one
// recipient.
type DeliveryKey struct {
	Workspace, Party, Source, ID string
}

// Decisions reads what each delivery decided from its dedup marker (kept
// Retention): Result's Seq, New, Wake and Kind as the delivery answered
// them, with Duplicate set. found[i] is false for a delivery never made, or
// whose marker has expired. An escalated copy has a marker of its own and
// is not found here.
func (b *Inbox) Decisions(ctx context.Context, keys []DeliveryKey) (res []Result, found []bool, err error) {
	res, found = make([]Result, len(keys)), make([]bool, len(keys))
	if len(keys) == 0 {
		return res, found, nil
	}
	pipe := b.rdb.Pipeline()
	cmds := make([]*redis.StringCmd, len(keys))
	for i, k := range keys {
		if err := checkRecipient(k.Workspace, k.Party); err != nil {
			return nil, nil, err
		}
		cmds[i] = pipe.Get(ctx, b.keysOf(k.Workspace, k.Party).marker(k.Source, k.ID))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, fmt.Errorf("delivery decisions: %w", err)
	}
	for i, c := range cmds {
		v, err := c.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("delivery decision of %s: %w", keys[i].ID, err)
		}
		// deliver.lua writes "<seq> <new> <wake> <kind>".
		f := strings.Fields(v)
		if len(f) != 4 {
			continue
		}
		seq, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			continue
		}
		res[i] = Result{Seq: seq, Duplicate: true, New: f[1] == "1", Wake: f[2] == "1", Kind: f[3]}
		found[i] = true
	}
	return res, found, nil
}
