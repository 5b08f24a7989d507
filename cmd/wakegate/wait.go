package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

// The most a single long-poll of wait asks for: under the gateway's 60 s
// cap, so each poll is served whole and wait re-polls across it.
const waitPoll = 55 * time.Second

const waitExits = `
Environment:
  WAKEGATE_URL    the gateway (default ` + defaultURL + `); --url wins
  WAKEGATE_TOKEN  the bearer token of the waiting party; --token wins

Exit codes:
  0  a matching entry arrived; it is printed (one line, or one JSON object)
  1  error: the token was refused, the gateway answered something unusable or
     was still not answering at the deadline, or the wait was interrupted
  2  usage
  3  the deadline passed with nothing matching (one line on stderr): act on the silence`

// runWait is `wakegate wait`: a worker parks on its own signal with a
// deadline. It subscribes to its subject (or
// uses a subscription that already covers it), then long-polls its inbox
// until an entry matching arrives, re-polling across the gateway's 60 s
// cap and retrying with backoff while the gateway is down or restarting,
// all within the deadline.
func runWait(c *cli, args []string) error {
	fs := c.newFlags("wait", "wakegate wait [--subject S]… [--types T,…] [--min-priority attention] [--timeout 30m] [--ack] [--no-subscribe] [--json]", `
Parks until the token's party gets an inbox entry that matches — about one of
the --subject(s) (exact, or github:org/repo#*), of one of the --types (exact
or prefix.*), at --min-priority or above — then prints it and exits 0. An
unacked matching entry already in the inbox counts. With --subject it first
subscribes to the subject (until it ends), unless a subscription of the party
already covers it or --no-subscribe. Quiet never holds a worker's own
subscription: a worker parked on its PR is resumed while quiet is on.
Without a match by --timeout it exits 3. Gateway restarts and outages are
ridden out with backoff until the deadline.

Example (a worker parked on its PR):
  wakegate wait --subject github:org/repo#12 --types github.pull_request.* --timeout 30m`, waitExits)
	a := addAPIFlags(fs)
	var subjects, types listFlag
	fs.Var(&subjects, "subject", "the subject to wait on: github:org/repo#12, session:<id>, github:org/repo#* (repeatable)")
	fs.Var(&types, "types", "only these types: exact or prefix.* (comma-separated, repeatable)")
	minPrio := fs.String("min-priority", "attention", "only entries at this priority or above: info, attention or critical")
	timeout := fs.Duration("timeout", 30*time.Minute, "the deadline: exit 3 when nothing matches within it")
	ack := fs.Bool("ack", false, "acknowledge the matching entry once printed")
	noSub := fs.Bool("no-subscribe", false, "do not subscribe; wait on what already reaches the inbox")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (subjects go in --subject)", pos[0])
	}
	f := waitFilter{subjects: subjects, types: types, min: event.Priority(*minPrio)}
	if err := f.validate(); err != nil {
		return err
	}
	if *timeout <= 0 {
		return usagef("--timeout must be positive")
	}
	cl, err := c.client(a, client.WithRetries(0))
	if err != nil {
		return err
	}
	deadline := time.Now().Add(*timeout)
	ctx, cancel := context.WithDeadline(c.ctx, deadline)
	defer cancel()
	w := &waiter{c: c, cl: cl, ctx: ctx}
	ended := func(err error) error {
		// Past the deadline by the clock even when ctx's timer has not
		// fired yet: an error met at the deadline is the deadline's.
		past := ctx.Err() != nil || !time.Now().Before(deadline)
		return waitEnded(err, c.ctx.Err() != nil, past, w.failures, w.lastErr, *timeout, f)
	}
	if !*noSub {
		for _, s := range f.subjects {
			if err := w.ensureSubscription(s, f); err != nil {
				return ended(err)
			}
		}
	}
	e, err := w.poll(f)
	if err != nil {
		return ended(err)
	}
	if a.json {
		_ = c.printJSON(e)
	} else {
		fmt.Fprintln(c.stdout, entryLine(*e, time.Now()))
	}
	if *ack {
		actx, acancel := context.WithTimeout(c.ctx, 10*time.Second)
		defer acancel()
		if _, err := cl.AckSeqs(actx, e.Seq); err != nil {
			fmt.Fprintf(c.stderr, "wakegate wait: the entry arrived but its ack failed: %s\n", describe(err))
		}
	}
	return nil
}

// waitEnded says how a wait that ended without a match exits:
// interrupted; err itself before the deadline; at the deadline, the
// gateway failing (an outage is not silence) or silence.
func waitEnded(err error, interrupted, pastDeadline bool, failures int, lastErr error, timeout time.Duration, f waitFilter) error {
	switch {
	case interrupted:
		return exitCodeError{code: exitError, msg: "interrupted before anything matched"}
	case !pastDeadline:
		return err
	case failures > 0:
		return exitCodeError{code: exitError, msg: fmt.Sprintf("the gateway did not answer before the deadline (%s): %s", timeout, describe(lastErr))}
	}
	return exitCodeError{code: exitSilence, msg: fmt.Sprintf("nothing matching %s within %s", f, timeout)}
}

// waitFilter is what a waited-for entry must be.
type waitFilter struct {
	subjects, types []string
	min             event.Priority
}

func (f waitFilter) validate() error {
	if f.min.Rank() < 0 {
		return usagef("--min-priority %q must be info, attention or critical", f.min)
	}
	for _, s := range f.subjects {
		if !strings.HasPrefix(s, "github:") && !strings.HasPrefix(s, "session:") {
			return usagef("--subject %q: want github:org/repo#12, github:org/repo#* or session:<id>", s)
		}
	}
	for _, t := range f.types {
		if !event.ValidType(strings.TrimSuffix(t, ".*")) && !event.ValidType(strings.TrimSuffix(t, ".*")+".x") {
			return usagef("--types %q: want a type or prefix.*", t)
		}
	}
	return nil
}

func (f waitFilter) String() string {
	var parts []string
	if len(f.subjects) > 0 {
		parts = append(parts, strings.Join(f.subjects, ","))
	} else {
		parts = append(parts, "any subject")
	}
	if len(f.types) > 0 {
		parts = append(parts, "types "+strings.Join(f.types, ","))
	}
	return strings.Join(parts, ", ") + " at " + string(f.min) + "+"
}

// match: the entry is about a subject waited on, its headline or latest
// type is one waited for, and its priority is high enough.
func (f waitFilter) match(e client.Entry) bool {
	if e.Priority.Rank() < f.min.Rank() {
		return false
	}
	if len(f.subjects) > 0 && !slices.ContainsFunc(f.subjects, func(s string) bool { return subjectMatches(s, e.Subject) }) {
		return false
	}
	if len(f.types) == 0 {
		return true
	}
	latest := ""
	if e.Latest != nil {
		latest = e.Latest.Type
	}
	return slices.ContainsFunc(f.types, func(t string) bool {
		return typeMatches(t, e.Type) || latest != "" && typeMatches(t, latest)
	})
}

// subjectMatches: pattern is exact, or github:org/repo#* for every PR of
// a repository.
func subjectMatches(pattern, subject string) bool {
	if p, ok := strings.CutSuffix(pattern, "#*"); ok {
		return strings.HasPrefix(subject, p+"#")
	}
	return pattern == subject
}

// typeMatches: pattern is exact, or prefix.*.
func typeMatches(pattern, typ string) bool {
	if p, ok := strings.CutSuffix(pattern, ".*"); ok {
		return strings.HasPrefix(typ, p+".")
	}
	return pattern == typ
}

type waiter struct {
	c        *cli
	cl       *client.Client
	ctx      context.Context
	failures int   // in a row
	lastErr  error // the last of them
}

// retry decides what to do after an error: nil to try again (after a
// pause, once the gateway is back), else the error to stop with.
func (w *waiter) retry(err error) error {
	if w.ctx.Err() != nil {
		return w.ctx.Err()
	}
	if !client.Temporary(err) {
		return err
	}
	w.failures++
	w.lastErr = err
	if w.failures == 1 {
		fmt.Fprintf(w.c.stderr, "wakegate wait: %s; retrying until the deadline\n", describe(err))
	}
	return sleepCtx(w.ctx, retryPause(w.failures))
}

func (w *waiter) recovered() {
	if w.failures > 0 {
		fmt.Fprintln(w.c.stderr, "wakegate wait: the gateway answers again")
		w.failures = 0
	}
}

// ensureSubscription subscribes the party to subject unless one of its
// subscriptions already brings what f waits for.
func (w *waiter) ensureSubscription(subject string, f waitFilter) error {
	for {
		subs, err := w.cl.Subscriptions(w.ctx)
		if err != nil {
			if err := w.retry(err); err != nil {
				return err
			}
			continue
		}
		w.recovered()
		if slices.ContainsFunc(subs, func(s client.Subscription) bool { return covers(s, subject, f) }) {
			return nil
		}
		req := client.SubscriptionRequest{Subjects: []string{subject}, Types: f.types}
		if f.min != event.Info {
			req.MinPriority = string(f.min)
		}
		if !strings.HasSuffix(subject, "#*") {
			req.Until = "subject_terminal" // no watch left behind on an ended subject
		}
		if _, err := w.cl.Subscribe(w.ctx, req); err != nil {
			if err := w.retry(err); err != nil {
				return err
			}
			continue // listed again first: a create whose answer was lost is not made twice
		}
		return nil
	}
}

// covers: s brings every entry f waits for about subject.
func covers(s client.Subscription, subject string, f waitFilter) bool {
	if s.Session != nil || len(s.Labels) > 0 || s.Delivery == "inbox" {
		return false
	}
	if event.Priority(s.MinPriority).Rank() > f.min.Rank() {
		return false
	}
	if !slices.ContainsFunc(s.Subjects, func(p string) bool { return subjectMatches(p, subject) }) {
		return false
	}
	if len(s.Types) == 0 {
		return true
	}
	if len(f.types) == 0 {
		return false
	}
	for _, want := range f.types {
		if !slices.ContainsFunc(s.Types, func(have string) bool { return typeCovers(have, want) }) {
			return false
		}
	}
	return true
}

// typeCovers: every type the pattern want matches, have matches too.
func typeCovers(have, want string) bool {
	if have == want {
		return true
	}
	p, ok := strings.CutSuffix(have, ".*")
	return ok && strings.HasPrefix(strings.TrimSuffix(want, ".*"), p+".")
}

// poll long-polls the inbox until an entry matches.
func (w *waiter) poll(f waitFilter) (*client.Entry, error) {
	var after int64 // 0: every unacked entry first
	for {
		wait := min(time.Until(deadlineOf(w.ctx)), waitPoll)
		if wait <= 0 {
			return nil, context.DeadlineExceeded
		}
		page, err := w.cl.Inbox(w.ctx, client.InboxQuery{After: after, Limit: 1000, Wait: wait, MinPriority: f.min})
		if err != nil {
			if err := w.retry(err); err != nil {
				return nil, err
			}
			continue
		}
		w.recovered()
		for i := range page.Entries {
			if f.match(page.Entries[i]) {
				return &page.Entries[i], nil
			}
		}
		after = page.Next
	}
}

func deadlineOf(ctx context.Context) time.Time {
	if dl, ok := ctx.Deadline(); ok {
		return dl
	}
	return time.Now().Add(waitPoll)
}
