package ingest

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/sessions"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/providers/kind"
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
// sessions' records.
//
// KEYS: "<tag>:journal" of every shard the items go to, then the registry
// key of every item, in item order.
// ARGV[1..3] journal.AppendArgs; ARGV[4] now (ms); ARGV[5] workspace;
// ARGV[6] item count n; then 15 values per item: tag, event JSON, source,
// id, type, parent, lineage JSON, labels JSON, paused_until ms, reason,
// seen ("1" when the pusher is the item's session), journal ("0" for a
// heartbeat: registry only), and for a terminal event its subject, time
// and summary (else three "").
// Returns per item {stream id or "", 1 appended | 0 duplicate}.
var commitEventsScript = redis.NewScript(journal.AppendLua + sessions.RegistryLua + `
wg_config(ARGV[1], ARGV[2], ARGV[3])
local now, ws, n = ARGV[4], ARGV[5], tonumber(ARGV[6])
local out = {}
for i = 1, n do
  local b = 6 + (i - 1) * 15
  local tag, ev, source, id, typ = ARGV[b+1], ARGV[b+2], ARGV[b+3], ARGV[b+4], ARGV[b+5]
  local seen, journal = ARGV[b+11], ARGV[b+12]
  local regkey = KEYS[#KEYS - n + i]
  if journal == '0' then
    wg_session(regkey, typ, now, '', '', '', '', '', seen)
    out[i] = {'', 1}
  else
    local lineage
    if redis.call('EXISTS', tag .. ':eid:' .. redis.sha1hex(source .. '\0' .. id)) == 1 then
      lineage = ''  -- a duplicate: applied already, wg_append returns the first entry
      if seen == '1' then redis.call('HSET', regkey, 'seen_at', now) end
    else
      lineage = wg_session(regkey, typ, now, ARGV[b+6], ARGV[b+7], ARGV[b+8], ARGV[b+9], ARGV[b+10], seen)
    end
    if lineage ~= '' and lineage ~= '[]' then
      ev = string.sub(ev, 1, -2) .. ',"lineage":' .. lineage .. '}'
    end
    local sid, added = wg_append(tag, ev, ws, source, id)
    if added == 1 and ARGV[b+13] ~= '' then
      wg_terminal(tag, ws, ARGV[b+13], typ, ARGV[b+14], ARGV[b+15], sid)
    end
    out[i] = {sid, added}
  end
end
return out
`)

// ErrCrossSlot is CommitEvents' error when, on Redis Cluster, a batch's
// events are about sessions of more than one shard: nothing was written.
var ErrCrossSlot = kind.New(kind.Unprocessable, "the batch spans several shards")

// CommitEvents commits a push of one workspace: every item or none.
// pusher is the token's party; its sighting is recorded with its own events.
func (s *Store) CommitEvents(ctx context.Context, workspace, pusher string, items []Item, now time.Time) ([]Result, error) {
	var streams []string
	seenStream := map[string]bool{}
	regKeys := make([]string, len(items))
	args := append(s.j.AppendArgs(), now.UnixMilli(), workspace, len(items))
	for i, it := range items {
		e := it.Event
		shard := s.j.ShardOf(e.Workspace, e.Subject)
		if sk := s.j.StreamKey(shard); !seenStream[sk] {
			seenStream[sk] = true
			streams = append(streams, sk)
		}
		regKeys[i] = sessions.Key(s.j, e.Workspace, e.Subject)
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
		args = append(args, s.j.Tag(shard), body, e.Source, e.ID, e.Type, it.Parent,
			string(lineage), string(labels), paused, it.Reason, flag(e.Subject == pusher), flag(it.Journal))
		if e.Terminal {
			args = append(args, e.Subject, e.Time.UTC().Format(time.RFC3339Nano), e.Summary)
		} else {
			args = append(args, "", "", "")
		}
	}
	res, err := commitEventsScript.Run(ctx, s.rdb, append(streams, regKeys...), args...).Slice()
	if redis.HasErrorPrefix(err, "CROSSSLOT") {
		return nil, fmt.Errorf("commit %d events: %w: %w", len(items), ErrCrossSlot, err)
	}
	if err != nil {
		return nil, fmt.Errorf("commit %d events: %w", len(items), err)
	}
	out := make([]Result, len(items))
	for i, r := range res {
		pair, _ := r.([]any)
		var sid string
		var added int64
		if len(pair) == 2 {
			sid, _ = pair[0].(string)
			added, _ = pair[1].(int64)
		}
		id := items[i].Event.ID
		e := items[i].Event
		if sid == "" {
			out[i] = Result{ID: id}
			continue
		}
		out[i] = Result{ID: id, Seq: journal.FormatSeq(s.j.ShardOf(e.Workspace, e.Subject), sid), Duplicate: added == 0}
	}
	return out, nil
}

func flag(b bool) string {
	if b {
		return "1"
	}
	return "0"
}
