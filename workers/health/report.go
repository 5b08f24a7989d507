package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// Report is the answer of GET /v1/health/supervision: every invariant of
// docs/design.md §9 with a count, a few examples, and the repairs of the last
// day.
type Report struct {
	Workspace string    `json:"workspace"`
	At        time.Time `json:"at"`
	// OK is true when no invariant but I3 (a measure) has a count.
	OK         bool        `json:"ok"`
	Invariants []Invariant `json:"invariants"`
	// LastSweep is when the periodic sweep last went over the workspace
	// (absent before its first pass): repairs and synthesized events come
	// from it.
	LastSweep time.Time `json:"last_sweep,omitzero"`
	// Behind is set when this check stopped at its bounds with more to
	// read: the counts may be short of the truth until the sweep catches
	// up.
	Behind bool `json:"behind,omitempty"`
}

// Invariant is one invariant's state.
type Invariant struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	// OK is Count == 0, except for I3, a measure that is always OK.
	OK bool `json:"ok"`
	// Count is what violates it: I1 sessions, I2 overdue unreached
	// entries plus undeliverable faults of the last day, I3 unacked
	// entries, I4 sessions, I5 recipients, I6 subscriptions, I7 parties.
	Count int64 `json:"count"`
	// Unit says what Count counts.
	Unit string `json:"unit"`
	// Examples are a few of them, largest first, each an object a person
	// and an agent can read.
	Examples []json.RawMessage `json:"examples"`
	// Repaired is how many repairs of this invariant the periodic sweep
	// made in the last day.
	Repaired int64 `json:"repaired"`
}

// invariant describes one row of the report.
type invariant struct {
	id, name, unit string
	measure        bool
}

var invariants = []invariant{
	{id: "I1", name: "coverage: every session that is not dead has an effective supervisor", unit: "sessions"},
	{id: "I2", name: "reach: an attention+ entry reaches a live recipient within escalate_after or escalates; nobody-could-hear is a fault", unit: "entries and faults"},
	{id: "I3", name: "at-least-once: unacked entries per party (a measure)", unit: "unacked entries", measure: true},
	{id: "I4", name: "one driver: no session driven by two parties in the last hour", unit: "sessions"},
	{id: "I5", name: "no spam: wakes per recipient in the last hour within the workspace rate", unit: "recipients"},
	{id: "I6", name: "bounded watches: no subscription active on a subject that has ended", unit: "subscriptions"},
	{id: "I7", name: "continuity: a party with unacked entries has a reader", unit: "parties"},
}

// finding is a stored finding: how many it counts, and its example.
type finding struct {
	N       int64           `json:"n"`
	Example json.RawMessage `json:"example"`
}

// report reads a workspace's findings, overlay (inv → item → finding, nil
// when cleared) over the stored ones.
func (s *Sweeper) report(ctx context.Context, ws string, now time.Time, overlay map[string]map[string]*finding) (*Report, error) {
	pipe := s.rdb.Pipeline()
	fcmds := make([]*redis.MapStringStringCmd, len(invariants))
	rcmds := make([]*redis.IntCmd, len(invariants))
	since := strconv.FormatInt(now.Add(-repairWindow).UnixMilli(), 10)
	for i, inv := range invariants {
		fcmds[i] = pipe.HGetAll(ctx, s.findingsKey(ws, inv.id))
		rcmds[i] = pipe.ZCount(ctx, s.repairsKey(ws, inv.id), since, "+inf")
	}
	faults := pipe.ZRevRangeByScoreWithScores(ctx, s.faultsKey(ws), &redis.ZRangeBy{
		Min: strconv.FormatInt(now.Add(-faultWindow).UnixMilli(), 10), Max: "+inf"})
	last := pipe.HGet(ctx, s.stampKey(ws), "pass")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, fmt.Errorf("health report: %w", err)
	}
	r := &Report{Workspace: ws, At: now.UTC(), OK: true}
	if ms, err := strconv.ParseInt(last.Val(), 10, 64); err == nil && ms > 0 {
		r.LastSweep = time.UnixMilli(ms).UTC()
	}
	for i, inv := range invariants {
		row := Invariant{ID: inv.id, Name: inv.name, Unit: inv.unit, Examples: []json.RawMessage{}, Repaired: rcmds[i].Val()}
		type item struct {
			key string
			f   finding
		}
		var items []item
		stored := fcmds[i].Val()
		for k, v := range stored {
			if f, ok := overlay[inv.id][k]; ok {
				if f != nil {
					items = append(items, item{k, *f})
					row.Count += f.N
				}
				continue
			}
			var f finding
			if json.Unmarshal([]byte(v), &f) != nil || f.N <= 0 {
				continue
			}
			items = append(items, item{k, f})
			row.Count += f.N
		}
		for k, f := range overlay[inv.id] {
			if _, ok := stored[k]; !ok && f != nil {
				items = append(items, item{k, *f})
				row.Count += f.N
			}
		}
		slices.SortFunc(items, func(a, b item) int {
			if a.f.N != b.f.N {
				if a.f.N > b.f.N {
					return -1
				}
				return 1
			}
			return strings.Compare(a.key, b.key)
		})
		if inv.id == "I2" {
			// Faults first: nobody heard those at all.
			fs := faults.Val()
			row.Count += int64(len(fs))
			for _, z := range fs {
				if len(row.Examples) == maxExamples {
					break
				}
				var ref faultRef
				m, _ := z.Member.(string)
				if json.Unmarshal([]byte(m), &ref) != nil {
					continue
				}
				b, _ := json.Marshal(struct {
					Kind string    `json:"kind"`
					At   time.Time `json:"at"`
					faultRef
				}{"fault", time.UnixMilli(int64(z.Score)).UTC(), ref})
				row.Examples = append(row.Examples, b)
			}
		}
		for _, it := range items {
			if len(row.Examples) == maxExamples {
				break
			}
			if inv.id == "I2" { // a party's overdue entries: each its own example
				var list []json.RawMessage
				if json.Unmarshal(it.f.Example, &list) == nil {
					for _, e := range list {
						if len(row.Examples) < maxExamples {
							row.Examples = append(row.Examples, e)
						}
					}
					continue
				}
			}
			row.Examples = append(row.Examples, it.f.Example)
		}
		row.OK = inv.measure || row.Count == 0
		r.OK = r.OK && row.OK
		r.Invariants = append(r.Invariants, row)
	}
	return r, nil
}

// gauges sets the per-invariant gauges to the sum over workspaces, and
// trims what ages out of the report's windows.
func (s *Sweeper) gauges(ctx context.Context, wss []string, now time.Time) error {
	totals := map[string]float64{}
	for _, ws := range wss {
		pipe := s.rdb.Pipeline()
		cmds := make([]*redis.StringSliceCmd, len(invariants))
		for i, inv := range invariants {
			cmds[i] = pipe.HVals(ctx, s.findingsKey(ws, inv.id))
			pipe.ZRemRangeByScore(ctx, s.repairsKey(ws, inv.id), "-inf", "("+strconv.FormatInt(now.Add(-repairWindow).UnixMilli(), 10))
		}
		pipe.ZRemRangeByScore(ctx, s.faultsKey(ws), "-inf", "("+strconv.FormatInt(now.Add(-faultWindow).UnixMilli(), 10))
		faults := pipe.ZCard(ctx, s.faultsKey(ws))
		if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
			return fmt.Errorf("health gauges: %w", err)
		}
		for i, inv := range invariants {
			for _, v := range cmds[i].Val() {
				var f finding
				if json.Unmarshal([]byte(v), &f) == nil {
					totals[inv.id] += float64(f.N)
				}
			}
		}
		totals["I2"] += float64(faults.Val())
	}
	for _, inv := range invariants {
		s.m.violations.WithLabelValues(inv.id).Set(totals[inv.id])
	}
	return nil
}
