// Package health is wakegate's health sweep (docs/design.md §9, docs/design.md §9 and
// §6.8): it checks the seven invariants of supervision against state,
// repairs what it can, synthesizes the events only time can produce, and
// answers GET /v1/health/supervision.
//
//   - I1 coverage: every session that is not dead has an effective
//     supervisor (supervision.EffectiveController, with the workspace
//     default and the registry's liveness, as the router resolves it).
//   - I2 reach: armed entries whose escalation check is overdue and that
//     reached nobody (escalate.Decide: the recipient dead, or silent since
//     the entry with no endpoint, or its push dead-lettered), and the
//     wakegate.fault.undeliverable of the last day. Repair: the
//     escalator's timer of the recipient is scheduled again (it runs at
//     once for what is due, and climbs as it always does).
//   - I3 at-least-once: unacked entries per party — a measure, never a
//     violation.
//   - I4 one driver: sessions prompted (session.prompted data.source) or
//     sent control messages (message.sent intent control, data.source) by
//     two or more parties in the last hour.
//   - I5 no spam: recipients whose deliveries decided more wakes in the
//     last hour than the workspace's rate lets through (burst + one per
//     period); the rate cap holds the excess, so this counts pressure, not
//     pushes.
//   - I6 bounded watches: subscriptions on a subject that has ended (and
//     stays ended) that can never match again: "until subject_terminal"
//     past a minute (the router closes those itself), or any whose every
//     subject has ended. Repair: closed.
//   - I7 continuity: parties with unacked entries and no authenticated
//     request since the oldest of them (a person with a push endpoint
//     acks by its 2xx, so it has a reader).
//
// It synthesizes session.stalled — busy past WAKEGATE_MAX_TURN with no
// heartbeat, fact id stalled/<session>/<ms of its last turn start or
// heartbeat> — and github.pull_request.stuck — open, not a draft, the
// same head and no new check result for WAKEGATE_PR_STUCK_AFTER, fact id
// stuck/<subject>/<head sha> — through journal.Append, so the router
// delivers them like any event (a paused session's stalled alarm is held
// back there), and a re-run or a second sweeper journals nothing
// twice.
//
// # How it knows what changed, and what it costs
//
// The sweep reads the journal and the routers' delivery ledgers itself,
// from positions it keeps, and files what each entry changes: the
// subject's state version (its last journal position, in T:dirty), a
// session's drivers, a recipient's wakes, a fault. A pass then evaluates
// only
//
//   - the subjects (sessions, pull requests) journaled since their last
//     evaluation;
//   - the subjects and recipients whose time-based condition is due, from
//     a due index (T:due: when a busy session would stall, a PR would be
//     stuck, a session or its supervisor would fall silent past the TTL,
//     a driver or a wake ages out of the hour, an armed escalation would
//     be overdue), so nothing is scanned to find what time has changed;
//   - the sessions with an I1 finding (a lease taken is not journaled),
//     and every session neither exited nor silent past the TTL at most
//     Config.Resync (1h) after its last evaluation (a lease released is
//     not journaled either);
//   - the active recipients (with unacked or armed entries, or wakes in
//     the hour) whose inbox counters — last seq, unacked, armed, and
//     while a finding depends on it their last sighting — moved: reading
//     the counters is three pipelined reads per active recipient; the
//     evaluation is skipped when they did not move.
//
// So a pass costs O(new journal and ledger entries) to file, plus
// O(changed + due subjects and recipients + I1 findings) evaluations of a
// few round trips each, plus O(active recipients) counter reads — never
// O(all sessions, PRs, subscriptions or inbox entries). A change of a
// workspace's settings re-evaluates that workspace once. Evaluations per
// pass are bounded (maxPerPass per workspace); what is left waits for the
// next pass, and the report says "behind". A report is one pass over its
// workspace without repairs (it files what the journal gained first,
// leaves the queues to the periodic pass and keeps its findings in memory,
// over the stored ones), plus O(findings) to read.
//
// The periodic pass runs on workers/schedule (once per tick across
// workers); every step is idempotent — findings are overwritten, queues
// consumed only at the version read, repairs and synthesized facts keyed
// by what they are — so an overrun pass beside the next one changes
// nothing twice.
//
// The package reads the delivery stores and repairs through them and the
// escalator; it must not import the gateway.
package health
