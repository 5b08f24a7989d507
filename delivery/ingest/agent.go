package ingest

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/providers/event"
)

// Item is one agent event to commit, with what it does to the registry
// record of the session it is about (its subject).
type Item struct {
	Event       *event.Event // source, id, workspace, subject, priority… set; lineage is stamped from the registry
	Parent      string       // session.spawned: the parent to record if the child has none yet
	Lineage     []string     // with Parent: the lineage it gives
	Labels      []string     // session.spawned data.labels
	PausedUntil time.Time    // session.paused
	Reason      string
	Journal     bool // false for session.heartbeat: the registry only
}

// Result of one committed item.
type Result struct {
	ID        string
	Seq       string
	Duplicate bool
}

// commitEventsScript journals agent events and applies them to their
// sessions' records. Its KEYS, ARGV and reply are in commit_events.lua.
//
//go:embed commit_events.lua
var commitEventsLua string

var commitEventsScript = keyspace.NewScript("delivery/ingest/commit_events.lua",
	journal.AppendLua, sessions.RegistryLua, commitEventsLua)

// CommitEvents commits a push of one workspace: every item or none, on
// every topology (docs/design.md §4). pusher is the token's party; its
// sighting is recorded with its own events.
//
// Items about sessions of one journal shard commit in one script. A batch
// that spans several shards (several slots on a Cluster) is committed as
// one batch record in one slot first: that record is the commit point.
// Its per-shard parts are then applied here, each one script, idempotent
// on (source, id) as every append is, and the record is deleted; a part
// left unapplied by a crash or a failed call is applied by RecoverBatches.
func (s *Store) CommitEvents(ctx context.Context, workspace, pusher string, items []Item, now time.Time) ([]Result, error) {
	calls, err := s.commitCalls(workspace, pusher, items, now)
	if err != nil {
		return nil, err
	}
	var recKey, recID string
	if len(calls) > 1 {
		rec, err := json.Marshal(batchRecord{Calls: calls})
		if err != nil {
			return nil, fmt.Errorf("encode batch of %d events: %w", len(items), err)
		}
		recKey = s.batchKey(calls[0].Shard)
		if recID, err = s.rdb.XAdd(ctx, &redis.XAddArgs{Stream: recKey, Values: []any{"b", rec}}).Result(); err != nil {
			return nil, fmt.Errorf("commit batch of %d events: %w", len(items), err)
		}
	}
	out := make([]Result, len(items))
	for _, c := range calls {
		res, err := s.apply(ctx, c)
		if err != nil {
			return nil, err // a recorded batch is applied by RecoverBatches
		}
		for k, i := range c.Items {
			e := items[i].Event
			out[i] = Result{ID: e.ID}
			if res[k].sid != "" {
				out[i] = Result{ID: e.ID, Seq: journal.FormatSeq(c.Shard, res[k].sid), Duplicate: !res[k].added}
			}
		}
	}
	if recID != "" {
		// Applied: should the delete fail, RecoverBatches applies the
		// record again to no effect, and deletes it.
		_ = s.rdb.XDel(ctx, recKey, recID).Err()
	}
	return out, nil
}

// commitCall is one script call of a commit: the items of one journal
// shard, with the script's KEYS and ARGV (commitEventsScript).
type commitCall struct {
	Shard int      `json:"s"`
	Items []int    `json:"i"` // indices in the push
	Keys  []string `json:"k"`
	Args  []string `json:"a"`
}

// batchRecord is the commit point of a batch that spans shards.
type batchRecord struct {
	Calls []commitCall `json:"c"`
}

// batchKey is the stream of batch records kept in a shard's slot.
func (s *Store) batchKey(shard int) string { return s.j.Keys(shard).Batches() }

// commitCalls groups items by journal shard, in push order.
func (s *Store) commitCalls(workspace, pusher string, items []Item, now time.Time) ([]commitCall, error) {
	var calls []commitCall
	byShard := map[int]int{}
	var perItem [][]string
	for i, it := range items {
		e := it.Event
		shard := s.j.ShardOf(e.Workspace, e.Subject)
		ci, ok := byShard[shard]
		if !ok {
			ci = len(calls)
			byShard[shard] = ci
			calls = append(calls, commitCall{Shard: shard, Keys: []string{s.j.StreamKey(shard)}})
		}
		calls[ci].Items = append(calls[ci].Items, i)
		calls[ci].Keys = append(calls[ci].Keys, sessions.Key(s.j, e.Workspace, e.Subject))
		body, err := journal.Marshal(e)
		if err != nil {
			return nil, err
		}
		var lineage, labels []byte
		if it.Parent != "" {
			lineage, _ = jsonMarshal(it.Lineage)
		}
		if it.Labels != nil {
			labels, _ = jsonMarshal(it.Labels)
		}
		paused := ""
		if !it.PausedUntil.IsZero() {
			paused = strconv.FormatInt(it.PausedUntil.UnixMilli(), 10)
		}
		args := []string{s.j.Tag(shard), body, e.Source, e.ID, e.Type, it.Parent,
			string(lineage), string(labels), paused, it.Reason, flag(e.Subject == pusher), flag(it.Journal)}
		if e.Terminal {
			args = append(args, e.Subject, e.Time.UTC().Format(time.RFC3339Nano), e.Summary)
		} else {
			args = append(args, "", "", "")
		}
		perItem = append(perItem, args)
	}
	head := make([]string, 0, 6)
	for _, a := range s.j.AppendArgs() {
		head = append(head, fmt.Sprint(a))
	}
	head = append(head, strconv.FormatInt(now.UnixMilli(), 10), workspace)
	for ci := range calls {
		c := &calls[ci]
		c.Args = append(append([]string(nil), head...), strconv.Itoa(len(c.Items)))
		for _, i := range c.Items {
			c.Args = append(c.Args, perItem[i]...)
		}
	}
	return calls, nil
}

type applied struct {
	sid   string
	added bool
}

// apply runs one call's script: per item, its stream id ("" for a
// heartbeat) and whether this call appended it.
func (s *Store) apply(ctx context.Context, c commitCall) ([]applied, error) {
	args := make([]any, len(c.Args))
	for i, a := range c.Args {
		args[i] = a
	}
	res, err := commitEventsScript.Run(ctx, s.rdb, c.Keys, args...).Slice()
	if err != nil {
		return nil, fmt.Errorf("commit %d events: %w", len(c.Items), err)
	}
	out := make([]applied, len(c.Items))
	for i, r := range res {
		if i >= len(out) {
			break
		}
		pair, _ := r.([]any)
		if len(pair) == 2 {
			out[i].sid, _ = pair[0].(string)
			n, _ := pair[1].(int64)
			out[i].added = n == 1
		}
	}
	return out, nil
}

// RecoverBatches applies the batch records older than grace that are
// still kept (their gateway crashed, or a call failed, before it deleted
// them), then deletes them. Applying again is idempotent. Run it
// periodically from one worker.
func (s *Store) RecoverBatches(ctx context.Context, now time.Time, grace time.Duration) (int, error) {
	maxID := strconv.FormatInt(now.Add(-grace).UnixMilli(), 10)
	n := 0
	for shard := range s.Shards() {
		key := s.batchKey(shard)
		msgs, err := s.rdb.XRangeN(ctx, key, "-", maxID, 100).Result()
		if err != nil {
			return n, fmt.Errorf("batch records of shard %d: %w", shard, err)
		}
		for _, m := range msgs {
			raw, _ := m.Values["b"].(string)
			var rec batchRecord
			if err := json.Unmarshal([]byte(raw), &rec); err != nil {
				return n, fmt.Errorf("batch record %s: %w", m.ID, err)
			}
			for _, c := range rec.Calls {
				if _, err := s.apply(ctx, c); err != nil {
					return n, fmt.Errorf("batch record %s: %w", m.ID, err)
				}
			}
			if err := s.rdb.XDel(ctx, key, m.ID).Err(); err != nil {
				return n, fmt.Errorf("batch record %s: %w", m.ID, err)
			}
			n++
		}
	}
	return n, nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
