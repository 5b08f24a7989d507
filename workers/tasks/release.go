package tasks

import (
	"context"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"

	"github.com/wakegate/wakegate/delivery/holds"
	"github.com/wakegate/wakegate/delivery/inbox"
	"github.com/wakegate/wakegate/delivery/keyspace"
	"github.com/wakegate/wakegate/delivery/outbound"
	"github.com/wakegate/wakegate/delivery/supervision"
	"github.com/wakegate/wakegate/providers/event"
)

// TypeRelease is the Asynq task type that ends a hold (docs/design.md §7): the
// rate cap's digest at the next token, the end of a quiet-hours period,
// the end of a PAUSED, or a quiet record's until. It rides the push queue.
const TypeRelease = "holds:release"

// DigestWebhookID is the webhook-id of one digest push: derived from the
// recipient, the hold's reason and the digest's slot, so a release run
// again enqueues nothing twice.
func DigestWebhookID(prefix, workspace, party, reason, slot string) string {
	if prefix == "" {
		prefix = keyspace.DefaultPrefix
	}
	sum := sha256.Sum256([]byte(prefix + "\x00" + workspace + "\x00" + party + "\x00digest\x00" + reason + "\x00" + slot))
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:20]))
}

// EnqueueDigest enqueues the push of one digest when party has an enabled
// endpoint, through the same path as every push (signing, retries, the
// breaker, dead letters). It returns the webhook-id, "" when the party has
// no endpoint (the entries still wait in its inbox).
func (p *Pusher) EnqueueDigest(ctx context.Context, workspace, party, webhookID, text string, entries []inbox.Entry) (string, error) {
	ep, err := p.endpoints.Get(ctx, workspace, party)
	if err != nil {
		return "", err
	}
	if ep == nil || ep.Disabled() {
		return "", nil
	}
	body, err := outbound.Render(ep.Format, outbound.Message{WebhookID: webhookID, Kind: inbox.KindDigest, Party: party,
		Digest: entries, Text: text})
	if err != nil {
		return "", err
	}
	seqs := make([]int64, 0, len(entries))
	cks := make([]string, 0, len(entries))
	for _, e := range entries {
		seqs = append(seqs, e.Seq)
		ck := e.CoalesceKey
		var ev event.Event
		if ck == "" && json.Unmarshal(e.Event, &ev) == nil && ev.Type != "" {
			ck = inbox.CoalesceKey(&ev) // a held wake's entry, named by its event
		}
		cks = append(cks, ck)
	}
	if slices.Contains(cks, "") {
		cks = nil // entries not read from an inbox: acked by seq alone
	}
	return webhookID, p.enqueue(ctx, webhookID, payload{Workspace: workspace, Party: party, WebhookID: webhookID,
		Kind: inbox.KindDigest, Format: ep.Format, Body: string(body), DecidedAt: p.now().UnixMilli(), Seqs: seqs, CKs: cks})
}

// rateSource reads a workspace's rate setting (supervision.Store.Settings).
type rateSource func(ctx context.Context, workspace string) (per time.Duration, burst int, err error)

// Releaser ends holds: it schedules release tasks (deterministic ids),
// handles them, and lifts quiet. It is safe for concurrent use.
type Releaser struct {
	p    *Pusher
	h    *holds.Store
	rate rateSource
	now  func() time.Time
}

// NewReleaser returns the releaser of p's pushes; rate reads a
// workspace's rate setting (nil: the defaults).
func NewReleaser(p *Pusher, h *holds.Store, rate func(ctx context.Context, workspace string) (time.Duration, int, error)) *Releaser {
	if rate == nil {
		rate = func(context.Context, string) (time.Duration, int, error) { return 30 * time.Second, 3, nil }
	}
	return &Releaser{p: p, h: h, rate: rate, now: time.Now}
}

// release is a TypeRelease task's payload.
type release struct {
	Workspace string `json:"ws"`
	Party     string `json:"party,omitempty"` // rate, quiet_hours, paused
	Reason    string `json:"reason"`          // rate | quiet_hours | paused | quiet (a quiet record's until)
	Scope     string `json:"scope,omitempty"` // quiet
	At        int64  `json:"at"`              // unix ms: the slot
}

func rateOf(per time.Duration, burst int) supervision.Rate {
	return supervision.Rate{Per: supervision.Duration(per), Burst: burst}
}

func (r *Releaser) schedule(ctx context.Context, rl release) error {
	b, _ := json.Marshal(rl)
	key := rl.Party
	if rl.Reason == holds.ReasonQuiet {
		key = rl.Scope
	}
	id := r.taskID(rl.Workspace, key, rl.Reason, rl.At)
	// Asynq schedules in whole seconds and may run a task up to a second
	// before its time: round up, so a release never runs before its slot.
	at := time.UnixMilli(rl.At).Truncate(time.Second).Add(time.Second)
	_, err := r.p.client.EnqueueContext(ctx, asynq.NewTask(TypeRelease, b), asynq.TaskID(id), asynq.Queue(r.p.QueueOf(rl.Workspace, key)),
		asynq.ProcessAt(at), asynq.MaxRetry(25), asynq.Timeout(30*time.Second))
	if errors.Is(err, asynq.ErrTaskIDConflict) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("schedule release %s of %s: %w", rl.Reason, key, err)
	}
	return nil
}

// taskID is the id of the release task of key (a party, or a quiet's
// scope) for reason at at (unix ms): one task per slot.
func (r *Releaser) taskID(workspace, key, reason string, at int64) string {
	return DigestWebhookID(r.p.cfg.Prefix, workspace, key, "release:"+reason, strconv.FormatInt(at, 10))
}

// quietEndID is the id of the task lifting scope's quiet at until (ms).
func (r *Releaser) quietEndID(workspace, scope string, until int64) string {
	return r.taskID(workspace, scope, holds.ReasonQuiet, until)
}

// Schedule schedules the release of a recipient's held wakes of reason
// (holds.ReasonRate at the next token, holds.ReasonQuietHours at the
// period's end, holds.ReasonPaused at its end): one task per (recipient,
// reason, slot), however many wakes it holds.
func (r *Releaser) Schedule(ctx context.Context, workspace, party, reason string, at time.Time) error {
	return r.schedule(ctx, release{Workspace: workspace, Party: party, Reason: reason, At: at.UnixMilli()})
}

// ScheduleQuietEnd schedules the lift of a quiet record at its until.
func (r *Releaser) ScheduleQuietEnd(ctx context.Context, workspace, scope string, until time.Time) error {
	return r.schedule(ctx, release{Workspace: workspace, Scope: scope, Reason: holds.ReasonQuiet, At: until.UnixMilli()})
}

// Release turns a recipient's held wakes of one reason into one digest
// push; nil when nothing was held. slot names the digest (its webhook-id).
func (r *Releaser) Release(ctx context.Context, workspace, party, reason, slot string) (*holds.Digest, error) {
	now := r.now()
	per, burst, err := r.rate(ctx, workspace)
	if err != nil {
		return nil, err
	}
	b, err := r.h.Take(ctx, workspace, party, reason, slot, rateOf(per, burst), now)
	var later *holds.NotDueError
	if errors.As(err, &later) { // held for a later end too: that end's release takes it all
		return nil, r.Schedule(ctx, workspace, party, reason, later.Due)
	}
	if err != nil || b == nil {
		return nil, err
	}
	d := &holds.Digest{Party: party, Reason: reason, Text: holds.Text(reason, b.Items, now), Entries: holds.Entries(b.Items)}
	if d.WebhookID, err = r.p.EnqueueDigest(ctx, workspace, party, DigestWebhookID(r.p.cfg.Prefix, workspace, party, reason, b.ID),
		d.Text, d.Entries); err != nil {
		return nil, err
	}
	return d, r.h.Done(ctx, workspace, party, reason)
}

// LiftQuiet removes the quiet record of scope ("all" or a party) and
// releases one digest to every recipient it held that no other quiet
// record still covers. ok is false when there was no such record.
//
// The lift scheduled at the record's until (ScheduleQuietEnd) is deleted
// with it. Should that fail, the task runs at its time, finds no record of
// that until, and does nothing.
func (r *Releaser) LiftQuiet(ctx context.Context, workspace, scope string) (digests []holds.Digest, ok bool, err error) {
	now := r.now()
	q, err := r.h.GetQuiet(ctx, workspace, scope)
	if err != nil {
		return nil, false, err
	}
	if ok, err = r.h.DeleteQuiet(ctx, workspace, scope); err != nil {
		return nil, false, err
	}
	if q != nil && !q.Until.IsZero() {
		// Not found (never scheduled, already run) or active (this is
		// that task running) leave nothing to cancel; nor does a failure
		// (the task finds no record of its until).
		_ = r.p.deleteTask(ctx, workspace, scope, r.quietEndID(workspace, scope, q.Until.UnixMilli()))
	}
	parties := []string{scope}
	if scope == holds.ScopeAll {
		if parties, err = r.h.QuietHeldParties(ctx, workspace); err != nil {
			return nil, ok, err
		}
	}
	slot := strconv.FormatInt(now.UnixMilli(), 10)
	digests = []holds.Digest{}
	for _, party := range parties {
		still, err := r.h.IsQuiet(ctx, workspace, party, now)
		if err != nil {
			return digests, ok, err
		}
		if still {
			continue
		}
		d, err := r.Release(ctx, workspace, party, holds.ReasonQuiet, slot)
		if err != nil {
			return digests, ok, err
		}
		if d != nil {
			digests = append(digests, *d)
		}
	}
	return digests, ok, nil
}

// ProcessTask is the Asynq handler of TypeRelease.
func (r *Releaser) ProcessTask(ctx context.Context, t *asynq.Task) error {
	var rl release
	if err := json.Unmarshal(t.Payload(), &rl); err != nil {
		return fmt.Errorf("release payload: %w: %w", err, asynq.SkipRetry)
	}
	now := r.now()
	switch rl.Reason {
	case holds.ReasonRate, holds.ReasonQuietHours:
		// Quiet hours: released at the period's end as it was when the
		// wakes were held (the settings snapshot of their routing); a
		// later end — the window made longer meanwhile — is its own
		// release, which Take defers this one to.
		_, err := r.Release(ctx, rl.Workspace, rl.Party, rl.Reason, strconv.FormatInt(rl.At, 10))
		return err
	case holds.ReasonPaused:
		p, err := r.h.GetPresence(ctx, rl.Workspace, rl.Party)
		if err != nil {
			return err
		}
		if p.Paused(now) { // paused again, for longer: that end has its own task
			return nil
		}
		_, err = r.Release(ctx, rl.Workspace, rl.Party, rl.Reason, strconv.FormatInt(rl.At, 10))
		return err
	case holds.ReasonQuiet:
		q, err := r.h.GetQuiet(ctx, rl.Workspace, rl.Scope)
		if err != nil {
			return err
		}
		if q == nil || q.Until.UnixMilli() != rl.At { // lifted, or replaced: not this until's to lift
			return nil
		}
		_, _, err = r.LiftQuiet(ctx, rl.Workspace, rl.Scope)
		return err
	}
	return fmt.Errorf("release reason %q: %w", rl.Reason, asynq.SkipRetry)
}
