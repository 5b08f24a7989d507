package health

import (
	"context"
	"crypto/sha1"
	_ "embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/journal"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/providers/event"
	"github.com/wakegate/wakegate/workers/route"
)

// The feed: the sweep's own reading of every journal shard and every
// delivery ledger, from positions it keeps (<prefix>:health:pos). It files
// what each entry changes for the checks — a subject's new state version,
// a session's drivers, a recipient's wakes, a fault — so a pass evaluates
// only what changed. Filing is idempotent (sorted-set members and
// max-scores), so two processes feeding at once, or a crash between filing
// and moving the position, changes nothing twice.

// Feed bounds: entries read per stream per round, and rounds per call of
// the periodic pass and of a report (which answers a person waiting).
const (
	feedBatch        = 500
	feedRounds       = 20
	reportFeedRounds = 2
)

// keyTTL is how long a session's drivers and a party's wakes outlive
// their last addition: past the hour they are all out of the window.
const keyTTL = 2 * window

// posScript moves stream positions forward only.
// Its KEYS, ARGV and reply are in pos.lua.
//
//go:embed pos.lua
var posLua string

var posScript = keyspace.NewScript("workers/health/pos.lua", posLua)

// feed files what the journal and the ledgers gained, in at most rounds
// rounds, pacing them with pace (nil: flat out); behind reports that it
// stopped at its bound with more to read.
func (s *Sweeper) feed(ctx context.Context, rounds int, pace *pacer) (n int, behind bool, err error) {
	shards := s.j.Config().Shards
	for range rounds {
		roundStart := time.Now()
		pos, err := s.rdb.HGetAll(ctx, s.posKey()).Result()
		if err != nil {
			return n, false, fmt.Errorf("health feed positions: %w", err)
		}
		f := &filer{s: s, pipe: s.rdb.Pipeline(), seqWS: map[string]string{}, wss: map[string]bool{}}
		more, before := false, n
		// The journal first: the ledger's entries refer to its events.
		jmsgs, err := s.readStreams(ctx, shards, pos, "j", s.j.StreamKey)
		if err != nil {
			return n, false, err
		}
		moved := []any{}
		for sh, msgs := range jmsgs {
			for _, m := range msgs {
				e, err := journal.Decode(sh, m)
				if err != nil {
					s.log.Warn("health feed: undecodable journal entry", "shard", sh, "id", m.ID, "err", err)
					continue
				}
				f.event(ctx, e, m.ID)
			}
			if len(msgs) > 0 {
				moved = append(moved, "j"+strconv.Itoa(sh), msgs[len(msgs)-1].ID)
				n += len(msgs)
			}
			more = more || len(msgs) == feedBatch
		}
		lmsgs, err := s.readStreams(ctx, shards, pos, "l", func(sh int) string { return route.LedgerKey(s.j, sh) })
		if err != nil {
			return n, false, err
		}
		var deliveries []ledgerEntry
		for sh, msgs := range lmsgs {
			for _, m := range msgs {
				deliveries = append(deliveries, ledgerEntryOf(m))
			}
			if len(msgs) > 0 {
				moved = append(moved, "l"+strconv.Itoa(sh), msgs[len(msgs)-1].ID)
				n += len(msgs)
			}
			more = more || len(msgs) == feedBatch
		}
		if err := f.deliveries(ctx, deliveries); err != nil {
			return n, false, err
		}
		for ws := range f.wss {
			f.pipe.SAdd(ctx, s.wsKey(), ws)
		}
		if _, err := f.pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return n, false, fmt.Errorf("health feed: %w", err)
		}
		if len(moved) > 0 {
			if err := posScript.Run(ctx, s.rdb, []string{s.posKey()}, moved...).Err(); err != nil {
				return n, false, fmt.Errorf("health feed positions: %w", err)
			}
		}
		s.m.fed.Add(float64(n - before))
		if !more {
			return n, false, nil
		}
		pace.wait(ctx, roundStart)
	}
	return n, true, nil
}

// readStreams reads up to feedBatch entries after the position of each
// shard's stream, in one pipeline.
func (s *Sweeper) readStreams(ctx context.Context, shards int, pos map[string]string, kind string,
	key func(int) string) ([][]redis.XMessage, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, shards)
	for sh := range shards {
		start := "-"
		if p := pos[kind+strconv.Itoa(sh)]; p != "" {
			start = "(" + p
		}
		cmds[sh] = pipe.XRangeN(ctx, key(sh), start, "+", feedBatch)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("health feed read: %w", err)
	}
	out := make([][]redis.XMessage, shards)
	for sh, c := range cmds {
		msgs, err := c.Result()
		if err != nil && !errors.Is(err, redis.Nil) {
			return nil, fmt.Errorf("health feed read %d: %w", sh, err)
		}
		out[sh] = msgs
	}
	return out, nil
}

// filer queues the writes of one round.
type filer struct {
	s     *Sweeper
	pipe  redis.Pipeliner
	seqWS map[string]string // journal seq → workspace, for the ledger entries of this round
	wss   map[string]bool
}

// streamTime is the time a stream id was appended; version orders the
// entries of one shard, ms first (a subject's events are in one shard).
func streamTime(id string) (time.Time, float64) {
	a, b, _ := strings.Cut(id, "-")
	ms, _ := strconv.ParseInt(a, 10, 64)
	n, _ := strconv.ParseInt(b, 10, 64)
	return time.UnixMilli(ms), float64(ms)*1000 + float64(min(n, 999))
}

// event files one journal entry.
func (f *filer) event(ctx context.Context, e *event.Event, streamID string) {
	ws := e.Workspace
	if !event.ValidWorkspace(ws) {
		return
	}
	s := f.s
	f.wss[ws] = true
	f.seqWS[e.Seq] = ws
	at, version := streamTime(streamID)
	ms := float64(at.UnixMilli())
	if strings.HasPrefix(e.Subject, "session:") || isPR(e.Subject) {
		f.pipe.ZAddGT(ctx, s.dirtyKey(ws), redis.Z{Score: version, Member: subjectMember + e.Subject})
	}
	if isPR(e.Subject) && !e.Terminal {
		f.pipe.ZAddGT(ctx, s.prsKey(ws), redis.Z{Score: ms, Member: e.Subject})
	}
	if strings.HasPrefix(e.Subject, "session:") && !strings.HasPrefix(e.Type, "wakegate.") {
		f.pipe.ZAddGT(ctx, s.sessionsKey(ws), redis.Z{Score: ms, Member: e.Subject})
	}
	var d struct {
		Source string `json:"source"`
		Intent string `json:"intent"`
		To     string `json:"to"`
		Type   string `json:"type"`
	}
	readData := func() { // only the types below read their data
		if len(e.Data) > 0 {
			_ = json.Unmarshal(e.Data, &d) // data that is not an object files nothing
		}
	}
	switch e.Type {
	case event.TypeSessionPrompted, event.TypeMessageSent:
		readData()
		// I4: who drives the session — prompts by their provenance,
		// messages with control intent by their sender.
		if d.Source == "" || len(d.Source) > 200 || (e.Type == event.TypeMessageSent && d.Intent != "control") {
			return
		}
		subj := e.Subject
		if e.SessionID != "" {
			subj = event.SessionSubject(e.SessionID)
		}
		if strings.HasPrefix(subj, "session:") {
			f.pipe.ZAddGT(ctx, s.drvKey(ws, subj), redis.Z{Score: ms, Member: d.Source})
			f.pipe.Expire(ctx, s.drvKey(ws, subj), keyTTL)
		}
	case event.TypeWakegateFaultUndeliverable:
		readData()
		b, _ := json.Marshal(faultRef{Seq: e.Seq, ID: e.ID, Subject: e.Subject, Type: d.Type, Summary: e.Summary})
		f.pipe.ZAddNX(ctx, s.faultsKey(ws), redis.Z{Score: ms, Member: string(b)})
	case event.TypeWakegateEscalated:
		// The escalated copy woke its party (a page always does).
		readData()
		if _, err := event.ParseParty(d.To); err == nil {
			f.pipe.SAdd(ctx, s.activeKey(ws), d.To)
			f.pipe.ZAddNX(ctx, s.wakesKey(ws, d.To), redis.Z{Score: ms, Member: digest("escalated\x00" + e.ID)})
			f.pipe.Expire(ctx, s.wakesKey(ws, d.To), keyTTL)
		}
	}
}

// faultRef is an undeliverable fault as I2 lists it.
type faultRef struct {
	Seq     string `json:"seq"`
	ID      string `json:"id"`
	Subject string `json:"subject"`
	Type    string `json:"type,omitempty"` // of the event nobody heard
	Summary string `json:"summary"`
}

// ledgerEntry is one delivery the router recorded.
type ledgerEntry struct {
	id, seq, source, evid, to string
}

func ledgerEntryOf(m redis.XMessage) ledgerEntry {
	str := func(k string) string { v, _ := m.Values[k].(string); return v }
	return ledgerEntry{id: m.ID, seq: str("seq"), source: str("source"), evid: str("id"), to: str("to")}
}

// deliveries files ledger entries: their recipient is active, and a
// delivery whose inbox write decided a wake (its dedup marker says so)
// counts toward the recipient's wakes of the hour.
func (f *filer) deliveries(ctx context.Context, entries []ledgerEntry) error {
	if len(entries) == 0 {
		return nil
	}
	if err := f.lookupWorkspaces(ctx, entries); err != nil {
		return err
	}
	var keys []inbox.DeliveryKey
	var kept []ledgerEntry
	for _, le := range entries {
		ws := f.seqWS[le.seq]
		if !event.ValidWorkspace(ws) {
			continue
		}
		if _, err := event.ParseParty(le.to); err != nil {
			continue
		}
		f.wss[ws] = true
		keys = append(keys, inbox.DeliveryKey{Workspace: ws, Party: le.to, Source: le.source, ID: le.evid})
		kept = append(kept, le)
	}
	decided, found, err := f.s.box.Decisions(ctx, keys)
	if err != nil {
		return err
	}
	for i, le := range kept {
		ws := keys[i].Workspace
		f.pipe.SAdd(ctx, f.s.activeKey(ws), le.to)
		if found[i] && decided[i].Wake {
			at, _ := streamTime(le.id)
			f.pipe.ZAddNX(ctx, f.s.wakesKey(ws, le.to), redis.Z{Score: float64(at.UnixMilli()), Member: digest(le.source + "\x00" + le.evid)})
			f.pipe.Expire(ctx, f.s.wakesKey(ws, le.to), keyTTL)
		}
	}
	return nil
}

// lookupWorkspaces finds the workspace of the events the entries refer to
// and this round did not read: from an agent or server source when it
// names one, else from the journal entry itself (one pipeline).
func (f *filer) lookupWorkspaces(ctx context.Context, entries []ledgerEntry) error {
	pipe := f.s.rdb.Pipeline()
	cmds := map[string]*redis.XMessageSliceCmd{}
	for _, le := range entries {
		if _, ok := f.seqWS[le.seq]; ok {
			continue
		}
		if rest, ok := strings.CutPrefix(le.source, "//wakegate/"); ok {
			ws, _, _ := strings.Cut(rest, "/")
			if event.ValidWorkspace(ws) {
				f.seqWS[le.seq] = ws
				continue
			}
		}
		if _, ok := cmds[le.seq]; ok {
			continue
		}
		shard, id, err := journal.ParseSeq(le.seq)
		if err != nil || shard >= f.s.j.Config().Shards {
			continue
		}
		cmds[le.seq] = pipe.XRangeN(ctx, f.s.j.StreamKey(shard), id, id, 1)
	}
	if len(cmds) == 0 {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("health feed: events of the ledger: %w", err)
	}
	for seq, c := range cmds {
		msgs := c.Val()
		if len(msgs) == 0 {
			continue // trimmed: its delivery no longer counts
		}
		raw, _ := msgs[0].Values["w"].(string)
		if raw == "" {
			shard, _, _ := journal.ParseSeq(seq)
			if e, err := journal.Decode(shard, msgs[0]); err == nil {
				raw = e.Workspace
			}
		}
		f.seqWS[seq] = raw
	}
	return nil
}

// digest is a short member for a long key.
func digest(s string) string {
	sum := sha1.Sum([]byte(s))
	return hex.EncodeToString(sum[:])
}
