package health

import "github.com/wakegate/wakegate/delivery/keyspace"

// Key layout. The feed's positions and the list of workspaces are global;
// everything else is per workspace under one hash tag
// (T = <prefix>:{hl:<workspace>}), so the per-workspace scripts run in one
// cluster slot:
//
//	<prefix>:health:pos   hash  "j<shard>" | "l<shard>" → last stream id filed of that journal shard | delivery ledger
//	<prefix>:health:ws    set   workspaces the feed has seen
//	T:dirty               zset  "s|<subject>" → journal position of the subject's last event not yet evaluated (its state version)
//	T:due                 zset  "s|<subject>" | "p|<party>" → ms when a time-based condition of it is next due
//	T:sessions            zset  sessions not known dead for good (not exited) → ms of their last event: rechecked when the settings change
//	T:prs                 zset  pull request subjects not yet seen to end → ms of their last event (the dashboard's list)
//	T:active              set   parties with unacked or armed entries, or wakes in the last hour: version-checked every pass
//	T:pver                hash  party → the inbox and sighting counters it was last evaluated at
//	T:drv:<session>       zset  driver party → ms of its last prompt or control message (I4)
//	T:wk:<party>          zset  sha1 of the event key → ms of a delivery that decided a wake (I5)
//	T:faults              zset  fault JSON → ms of a wakegate.fault.undeliverable (I2)
//	T:f:<invariant>       hash  subject or party → finding JSON (n, example)
//	T:rep:<invariant>     zset  what was repaired → ms (the last day)
//	T:emitted             hash  subject → id of the last fact synthesized about it (stalled, stuck)
//	T:stamp               hash  settings → hash of the workspace settings last applied; pass → ms of the last periodic pass

func (s *Sweeper) posKey() string { return keyspace.HealthPos(s.cfg.Prefix) }
func (s *Sweeper) wsKey() string  { return keyspace.HealthWorkspaces(s.cfg.Prefix) }

func (s *Sweeper) tag(ws string) string { return keyspace.Health(s.cfg.Prefix, ws) }

func (s *Sweeper) dirtyKey(ws string) string         { return s.tag(ws) + ":dirty" }
func (s *Sweeper) dueKey(ws string) string           { return s.tag(ws) + ":due" }
func (s *Sweeper) sessionsKey(ws string) string      { return s.tag(ws) + ":sessions" }
func (s *Sweeper) activeKey(ws string) string        { return s.tag(ws) + ":active" }
func (s *Sweeper) prsKey(ws string) string           { return s.tag(ws) + ":prs" }
func (s *Sweeper) pverKey(ws string) string          { return s.tag(ws) + ":pver" }
func (s *Sweeper) drvKey(ws, session string) string  { return s.tag(ws) + ":drv:" + session }
func (s *Sweeper) wakesKey(ws, party string) string  { return s.tag(ws) + ":wk:" + party }
func (s *Sweeper) faultsKey(ws string) string        { return s.tag(ws) + ":faults" }
func (s *Sweeper) findingsKey(ws, inv string) string { return s.tag(ws) + ":f:" + inv }
func (s *Sweeper) repairsKey(ws, inv string) string  { return s.tag(ws) + ":rep:" + inv }
func (s *Sweeper) emittedKey(ws string) string       { return s.tag(ws) + ":emitted" }
func (s *Sweeper) stampKey(ws string) string         { return s.tag(ws) + ":stamp" }

// Members of T:dirty and T:due: a subject (evaluated as a session or a
// pull request) or a party (evaluated as a recipient).
const (
	subjectMember = "s|"
	partyMember   = "p|"
)
