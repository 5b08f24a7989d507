package journal

import (
	"context"
	"fmt"

	"github.com/wakegate/wakegate/providers/event"
)

// Find returns the retained events journaled as (source, id), whatever
// their subject: an operator names an event by its CloudEvents identity,
// but its dedup marker lives in the shard of a subject the operator may not
// know. It looks the marker up in every shard (one script call each), then
// reads the entries found. An event normally has one; an agent that pushed one id
// about two subjects landing in two shards has two. A marker whose entry
// the journal has trimmed (by size, before the marker expired) yields
// nothing. Events come back in shard order, seq set.
func (j *Journal) Find(ctx context.Context, source, id string) ([]*event.Event, error) {
	var out []*event.Event
	for s := range j.cfg.Shards {
		sid, err := j.lookup(ctx, s, source, id)
		if err != nil {
			return nil, fmt.Errorf("journal find %s: %w", id, err)
		}
		if sid == "" {
			continue
		}
		e, err := j.Get(ctx, FormatSeq(s, sid))
		if err != nil {
			return nil, err
		}
		if e != nil {
			out = append(out, e)
		}
	}
	return out, nil
}

// Recorded returns the event journaled as (source, id) about subject in
// workspace, or nil when there is none (or it is no longer retained): a
// Lookup, then a Get.
func (j *Journal) Recorded(ctx context.Context, workspace, subject, source, id string) (*event.Event, error) {
	seq, err := j.Lookup(ctx, workspace, subject, source, id)
	if err != nil || seq == "" {
		return nil, err
	}
	return j.Get(ctx, seq)
}
