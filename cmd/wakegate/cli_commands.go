package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

// ---- wakegate events tail ------------------------------------------------

func runEvents(c *cli, args []string) error {
	fs := c.newFlags("events", "wakegate events tail [--follow] [--types T,…] [--subjects S,…] [-n 20] [--after CURSOR] [--json]", `
Prints the last events of the journal (GET /v1/events), oldest first, and
with --follow keeps printing new ones as they are journaled (long-polls of
30 s; Ctrl-C stops). Without --after it reads from the oldest retained event
to the end to find the last ones. A session token reads its own subtree;
events:read:any reads the whole workspace. --json prints one CloudEvent per
line.`, "")
	a := addAPIFlags(fs)
	follow := fs.Bool("follow", false, "keep printing new events as they are journaled")
	fs.BoolVar(follow, "f", false, "short for --follow")
	var types, subjects listFlag
	fs.Var(&types, "types", "only these types: exact or prefix.* (comma-separated, repeatable)")
	fs.Var(&subjects, "subjects", "only these subjects: exact or github:org/repo#* (comma-separated, repeatable)")
	lines := fs.Int("n", 20, "how many of the last events to print (0: every event read)")
	after := fs.String("after", "", "read after this cursor (a \"next\" of an earlier read) instead of from the oldest")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] != "tail" {
		return usagef("want: wakegate events tail [flags]")
	}
	if *lines < 0 {
		return usagef("-n must be 0 or more")
	}
	cl, err := c.client(a)
	if err != nil {
		return err
	}
	q := client.EventsQuery{After: *after, Types: types, Subjects: subjects, Limit: 1000}
	var last []event.Event
	for { // read to the end, keeping the last n
		page, err := cl.Events(c.ctx, q)
		if err != nil {
			return err
		}
		last = append(last, page.Events...)
		if *lines > 0 && len(last) > *lines {
			last = append(last[:0], last[len(last)-*lines:]...)
		}
		q.After = page.Next
		if len(page.Events) == 0 {
			break
		}
	}
	out := newEventPrinter(c, a.json)
	for i := range last {
		out.print(&last[i])
	}
	if !*follow {
		if len(last) == 0 && !a.json {
			fmt.Fprintln(c.stderr, "no events")
		}
		return nil
	}
	q.Wait = 30 * time.Second
	var failures int
	for {
		page, err := cl.Events(c.ctx, q)
		if err != nil {
			if c.ctx.Err() != nil {
				return c.ctx.Err()
			}
			if !client.Temporary(err) {
				return err
			}
			failures++
			if failures == 1 {
				fmt.Fprintf(c.stderr, "wakegate events: %s; retrying\n", describe(err))
			}
			if err := sleepCtx(c.ctx, retryPause(failures)); err != nil {
				return err
			}
			continue
		}
		if failures > 0 {
			fmt.Fprintln(c.stderr, "wakegate events: reconnected")
			failures = 0
		}
		for i := range page.Events {
			out.print(&page.Events[i])
		}
		q.After = page.Next
	}
}

// eventPrinter prints events as they come: a JSON line each, or rows of
// columns that start wide enough for most and widen when one is not.
type eventPrinter struct {
	c       *cli
	json    bool
	widths  [4]int
	printed bool
}

func newEventPrinter(c *cli, asJSON bool) *eventPrinter {
	return &eventPrinter{c: c, json: asJSON, widths: [4]int{20, 9, 34, 28}}
}

func (p *eventPrinter) print(e *event.Event) {
	if p.json {
		_ = p.c.printJSON(e)
		return
	}
	cells := []cell{plain(stamp(e.Time)), {string(e.Priority), priorityColor(string(e.Priority))}, plain(e.Type), plain(e.Subject), plain(eventSummary(e))}
	if !p.printed {
		p.printed = true
		p.row([]cell{{"TIME", sgrBold}, {"PRIORITY", sgrBold}, {"TYPE", sgrBold}, {"SUBJECT", sgrBold}, {"SUMMARY", sgrBold}})
	}
	p.row(cells)
}

func (p *eventPrinter) row(cells []cell) {
	var b strings.Builder
	for i, cl := range cells {
		b.WriteString(p.c.paint(cl.sgr, cl.text))
		if i < len(p.widths) {
			n := len([]rune(cl.text))
			p.widths[i] = max(p.widths[i], n)
			b.WriteString(strings.Repeat(" ", p.widths[i]-n+2))
		}
	}
	fmt.Fprintln(p.c.stdout, strings.TrimRight(b.String(), " "))
}

// eventSummary is an event's summary, or its data compactly when it has
// none.
func eventSummary(e *event.Event) string {
	if e.Summary != "" {
		return truncate(e.Summary, 100)
	}
	if len(e.Data) > 0 {
		return truncate(string(e.Data), 100)
	}
	return ""
}

// retryPause is the pause after the n-th failure in a row: 250 ms
// doubling, at most 5 s.
func retryPause(n int) time.Duration {
	return min(250*time.Millisecond<<min(n-1, 5), 5*time.Second)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// ---- wakegate inbox ------------------------------------------------------

func runInbox(c *cli, args []string) error {
	fs := c.newFlags("inbox", "wakegate inbox [--wait 30s] [--after SEQ] [--limit N] [--ack] [--json]\n       wakegate inbox --ack-through SEQ", `
Lists the caller's unacked inbox entries (GET /v1/inbox), lowest seq first:
one entry per subject while unacked, COUNT events folded in, KIND what the
latest update decided (wake, alert, notice, digest). --wait long-polls (at
most 60 s) until an entry decides a wake. --ack acknowledges what was listed;
--ack-through SEQ acknowledges every entry up to SEQ without listing.`, "")
	a := addAPIFlags(fs)
	wait := fs.Duration("wait", 0, "long-poll up to this long (≤ 60s) for an entry that decides a wake")
	after := fs.Int64("after", 0, "list entries after this seq (a \"next\" of an earlier read)")
	limit := fs.Int("limit", 100, "at most this many entries (≤ 1000)")
	ack := fs.Bool("ack", false, "acknowledge the entries listed")
	through := fs.Int64("ack-through", 0, "acknowledge every entry up to this seq, list nothing")
	party := fs.String("party", "", "another party's inbox (scope operator)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	switch {
	case *wait < 0 || *wait > client.MaxWait:
		return usagef("--wait must be from 0 to 60s")
	case *through < 0 || *after < 0:
		return usagef("seqs are positive")
	case *through > 0 && (*ack || *wait > 0):
		return usagef("--ack-through acknowledges without listing: drop --ack and --wait")
	case *party != "" && (*ack || *through > 0):
		return usagef("acknowledging is for the caller's own inbox: drop --party")
	}
	cl, err := c.client(a)
	if err != nil {
		return err
	}
	if *through > 0 {
		n, err := cl.AckThrough(c.ctx, *through)
		if err != nil {
			return err
		}
		if a.json {
			return c.printJSON(map[string]int{"acked": n})
		}
		fmt.Fprintf(c.stdout, "acked %d %s through seq %d\n", n, plural(n, "entry", "entries"), *through)
		return nil
	}
	page, err := cl.Inbox(c.ctx, client.InboxQuery{After: *after, Limit: *limit, Wait: *wait, Party: *party})
	if err != nil {
		return err
	}
	acked := -1
	if *ack && len(page.Entries) > 0 {
		if acked, err = cl.AckThrough(c.ctx, page.Next); err != nil {
			return err
		}
	}
	if a.json {
		out := map[string]any{"entries": page.Entries, "next": page.Next}
		if acked >= 0 {
			out["acked"] = acked
		}
		return c.printJSON(out)
	}
	if len(page.Entries) == 0 {
		fmt.Fprintf(c.stdout, "no unacked entries (next %d)\n", page.Next)
		return nil
	}
	c.entryTable(page.Entries, time.Now())
	if acked >= 0 {
		fmt.Fprintf(c.stdout, "acked %d %s through seq %d\n", acked, plural(acked, "entry", "entries"), page.Next)
	} else {
		fmt.Fprintf(c.stdout, "next %d · acknowledge with: wakegate inbox --ack-through %d\n", page.Next, page.Next)
	}
	return nil
}

// entryTable prints inbox entries as a table.
func (c *cli) entryTable(entries []client.Entry, now time.Time) {
	t := &table{head: []string{"SEQ", "PRIORITY", "KIND", "TYPE", "SUBJECT", "COUNT", "AGE", "SUMMARY"}}
	for _, e := range entries {
		kind := e.Kind
		if e.Escalated != nil {
			kind += "↑" + strconv.Itoa(e.Escalated.Level)
		}
		t.add(plain(strconv.FormatInt(e.Seq, 10)), cell{string(e.Priority), priorityColor(string(e.Priority))},
			cell{kind, kindColor(e.Kind)}, plain(e.Type), plain(e.Subject), plain(strconv.Itoa(e.Count)),
			plain(age(e.LastAt, now)), plain(truncate(e.Summary, 80)))
	}
	t.render(c)
}

func kindColor(k string) string {
	switch k {
	case "alert", "wake":
		return sgrBold
	case "digest":
		return sgrDim
	}
	return ""
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// ---- wakegate quiet ------------------------------------------------------

func runQuiet(c *cli, args []string) error {
	fs := c.newFlags("quiet", "wakegate quiet on|off|status [--scope self|all|PARTY] [--until 2h|RFC3339] [--reason TEXT] [--json]", `
Quiet holds wakes and pushes to people and supervisors; entries stay in the
inbox, and a worker parked on its own signal (wakegate wait) is still
resumed. "on" sets it (PUT /v1/quiet), "off" lifts it and prints the one
digest of what it held, "status" lists the workspace's live quiet.
Quiet for another party or all needs the admin scope or a human: token, and
an --until at most 24 h away.`, "")
	a := addAPIFlags(fs)
	scope := fs.String("scope", "self", "self, all, or a party (session:<id>, human:<channel>)")
	until := fs.String("until", "", "when it lifts itself: a duration from now (2h) or an RFC 3339 time; empty: until off")
	reason := fs.String("reason", "", "why, for whoever reads the status")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one of: on, off, status")
	}
	cl, err := c.client(a)
	if err != nil {
		return err
	}
	switch pos[0] {
	case "on":
		u, err := parseUntil(*until, time.Now())
		if err != nil {
			return err
		}
		q, err := cl.QuietOn(c.ctx, client.QuietRequest{Scope: *scope, Reason: *reason, Until: u})
		if err != nil {
			return err
		}
		if a.json {
			return c.printJSON(q)
		}
		msg := "quiet on for " + q.Scope
		if !q.Until.IsZero() {
			msg += " until " + stamp(q.Until)
		} else {
			msg += " until lifted (wakegate quiet off)"
		}
		if q.Reason != "" {
			msg += " — " + q.Reason
		}
		fmt.Fprintln(c.stdout, msg)
	case "off":
		lifted, err := cl.QuietOff(c.ctx, *scope)
		if err != nil {
			return err
		}
		if a.json {
			return c.printJSON(lifted)
		}
		if len(lifted.Digests) == 0 {
			fmt.Fprintf(c.stdout, "quiet lifted for %s; it held nothing\n", lifted.Scope)
			return nil
		}
		fmt.Fprintf(c.stdout, "quiet lifted for %s; released:\n", lifted.Scope)
		for _, d := range lifted.Digests {
			fmt.Fprintf(c.stdout, "  %s  %s\n", c.paint(sgrBold, d.Party), d.Text)
		}
	case "status":
		qs, err := cl.QuietStatus(c.ctx)
		if err != nil {
			return err
		}
		if a.json {
			if qs == nil {
				qs = []client.Quiet{}
			}
			return c.printJSON(map[string]any{"quiet": qs})
		}
		if len(qs) == 0 {
			fmt.Fprintln(c.stdout, "no quiet in this workspace")
			return nil
		}
		t := &table{head: []string{"SCOPE", "BY", "SINCE", "UNTIL", "REASON"}}
		for _, q := range qs {
			u := "lifted by hand"
			if !q.Until.IsZero() {
				u = stamp(q.Until)
			}
			t.add(cell{q.Scope, sgrBold}, plain(q.By), plain(stamp(q.At)), plain(u), plain(truncate(q.Reason, 60)))
		}
		t.render(c)
	default:
		return usagef("unknown quiet action %q: want on, off or status", pos[0])
	}
	return nil
}

// ---- wakegate health -----------------------------------------------------

func runHealth(c *cli, args []string) error {
	fs := c.newFlags("health", "wakegate health [--json]", `
Runs the supervision health check (GET /v1/health/supervision, scope admin):
the invariants of docs/design.md §9 — sessions with no effective supervisor,
entries that reached nobody, unacked entries, sessions with two drivers,
wakes per hour, watches on ended subjects, parties nobody reads — each with
its count and some examples.`, exitCodesHelp+" (a gateway without the route: 1, and says so)")
	a := addAPIFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cl, err := c.client(a)
	if err != nil {
		return err
	}
	h, err := cl.Health(c.ctx)
	if errors.Is(err, client.ErrNoHealthRoute) {
		return exitCodeError{code: exitError, msg: "this gateway does not serve GET /v1/health/supervision (404): " +
			"the supervision health check is not built or not deployed on it yet"}
	}
	if err != nil {
		return err
	}
	if a.json {
		_, err := fmt.Fprintf(c.stdout, "%s\n", compactJSON(h.Raw))
		return err
	}
	if len(h.Invariants) == 0 {
		fmt.Fprintf(c.stdout, "%s\n", compactJSON(h.Raw))
		return nil
	}
	failing := 0
	for _, inv := range h.Invariants {
		if inv.Failing() {
			failing++
		}
	}
	head := "supervision health"
	if h.Workspace != "" {
		head += " of workspace " + h.Workspace
	}
	if !h.At.IsZero() {
		head += " at " + stamp(h.At)
	}
	if failing == 0 {
		fmt.Fprintf(c.stdout, "%s: all %d checks hold\n", head, len(h.Invariants))
	} else {
		fmt.Fprintf(c.stdout, "%s: %s of %d %s failing\n", head, c.paint(sgrRed+sgrBold, strconv.Itoa(failing)),
			len(h.Invariants), plural(len(h.Invariants), "check", "checks"))
	}
	t := &table{head: []string{"CHECK", "OK", "COUNT", "WHAT", "EXAMPLES"}}
	for _, inv := range h.Invariants {
		ok := cell{"ok", sgrGreen}
		if inv.Failing() {
			ok = cell{"FAIL", sgrRed + sgrBold}
		}
		var ex []string
		for i, e := range inv.Examples {
			if i == 3 {
				ex = append(ex, fmt.Sprintf("(+%d)", len(inv.Examples)-3))
				break
			}
			ex = append(ex, truncate(exampleText(e), 40))
		}
		t.add(plain(inv.ID), ok, plain(strconv.Itoa(inv.Count)), plain(truncate(inv.Name, 60)), plain(strings.Join(ex, ", ")))
	}
	t.render(c)
	return nil
}

// exampleText shows a health example: a string as is; an object by the
// party, session or subject it names; anything else as compact JSON.
func exampleText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var m map[string]any
	if json.Unmarshal(raw, &m) == nil {
		for _, k := range []string{"session", "party", "subject", "recipient", "id"} {
			if v, ok := m[k].(string); ok && v != "" {
				return v
			}
		}
	}
	return string(compactJSON(raw))
}

func compactJSON(raw []byte) []byte {
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return raw
	}
	return b.Bytes()
}

// ---- wakegate brief ------------------------------------------------------

func runBrief(c *cli, args []string) error {
	fs := c.newFlags("brief", "wakegate brief [--json]", `
Prints the caller's brief (GET /v1/brief), from state alone: leases held,
subscriptions, unacked entries (highest priority first), open decisions
(sessions awaiting input or a permission), open subjects and the journal
cursor — what a supervisor reads after a restart or a compaction.`, "")
	a := addAPIFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cl, err := c.client(a)
	if err != nil {
		return err
	}
	b, err := cl.Brief(c.ctx)
	if err != nil {
		return err
	}
	if a.json {
		return c.printJSON(b)
	}
	writeBrief(c.stdout, b, time.Now())
	return nil
}

// writeBrief renders a brief as text a person or a model reads (the CLI,
// and the hook's additional context after a resume or a compaction).
func writeBrief(w io.Writer, b *client.Brief, now time.Time) {
	fmt.Fprintf(w, "wakegate brief for %s (workspace %s)\n", b.Party, b.Workspace)
	if len(b.Leases) == 0 {
		fmt.Fprintln(w, "Leases held: none")
	} else {
		fmt.Fprintln(w, "Leases held:")
		for _, l := range b.Leases {
			fmt.Fprintf(w, "  - %s of session:%s (scope %s, epoch %d)\n", l.Role, l.Session, l.Scope, l.Epoch)
		}
	}
	if len(b.Subscriptions) == 0 {
		fmt.Fprintln(w, "Subscriptions: none")
	} else {
		fmt.Fprintln(w, "Subscriptions:")
		for _, s := range b.Subscriptions {
			fmt.Fprintf(w, "  - %s %s\n", s.ID, describeSubscription(s))
		}
	}
	switch {
	case b.UnackedCount == 0:
		fmt.Fprintln(w, "Unacked entries: none")
	default:
		fmt.Fprintf(w, "Unacked entries (%d, highest priority first):\n", b.UnackedCount)
		for _, e := range b.Unacked {
			fmt.Fprintf(w, "  - %s\n", entryLine(e, now))
		}
		if len(b.Unacked) < b.UnackedCount {
			fmt.Fprintf(w, "  … and %d more (wakegate inbox)\n", b.UnackedCount-len(b.Unacked))
		}
	}
	if len(b.OpenDecisions) > 0 {
		fmt.Fprintln(w, "Open decisions (sessions you control that wait on you):")
		for _, d := range b.OpenDecisions {
			since := ""
			if !d.Since.IsZero() {
				since = " for " + age(d.Since, now)
			}
			fmt.Fprintf(w, "  - session:%s %s%s\n", strings.TrimPrefix(d.Session, "session:"), d.Type, since)
		}
	}
	if len(b.OpenSubjects) > 0 {
		fmt.Fprintln(w, "Open subjects:")
		for _, s := range b.OpenSubjects {
			line := s.Subject
			if s.State != "" || s.Liveness != "" {
				line += " (" + strings.Trim(s.Liveness+", "+s.State, ", ") + ")"
			}
			if s.Latest != nil {
				line += fmt.Sprintf(" — latest: %s %s", s.Latest.Type, truncate(s.Latest.Summary, 80))
			}
			fmt.Fprintf(w, "  - %s\n", strings.TrimSpace(line))
		}
	}
	fmt.Fprintf(w, "Inbox next seq %d; journal cursor %s\n", b.InboxNext, b.Cursor)
}

// entryLine is one inbox entry on one line.
func entryLine(e client.Entry, now time.Time) string {
	s := fmt.Sprintf("seq %d [%s %s] %s %s", e.Seq, e.Priority, e.Kind, e.Type, e.Subject)
	if e.Summary != "" {
		s += " — " + truncate(e.Summary, 120)
	}
	if e.Count > 1 {
		s += fmt.Sprintf(" (×%d)", e.Count)
	}
	if !e.LastAt.IsZero() {
		s += ", " + age(e.LastAt, now) + " ago"
	}
	if m := entryMessageMarker(e); m != "" {
		s += " [" + m + "]"
	}
	return s
}

// entryMessageMarker is the marker of a message.sent entry's message, which
// a harness that injects the message as a prompt keeps in it, so the
// prompt hook labels the turn with its sender (docs/design.md §12); "" otherwise.
func entryMessageMarker(e client.Entry) string {
	if e.Event == nil || e.Event.Type != event.TypeMessageSent {
		return ""
	}
	var d struct {
		Source string `json:"source"`
	}
	if json.Unmarshal(e.Event.Data, &d) != nil || d.Source == "" {
		return ""
	}
	return messageMarker(e.Event.ID, d.Source)
}

func describeSubscription(s client.Subscription) string {
	var parts []string
	if len(s.Types) > 0 {
		parts = append(parts, "types="+strings.Join(s.Types, ","))
	}
	if len(s.Subjects) > 0 {
		parts = append(parts, "subjects="+strings.Join(s.Subjects, ","))
	}
	if s.Session != nil {
		parts = append(parts, "session="+s.Session.ID+"/"+s.Session.Scope)
	}
	if len(s.Labels) > 0 {
		parts = append(parts, "labels="+strings.Join(s.Labels, ","))
	}
	if s.MinPriority != "" && s.MinPriority != "info" {
		parts = append(parts, "min="+s.MinPriority)
	}
	if s.Delivery != "" && s.Delivery != "wake" {
		parts = append(parts, "delivery="+s.Delivery)
	}
	if s.Until != "" {
		parts = append(parts, "until="+s.Until)
	}
	return strings.Join(parts, " ")
}

// ---- wakegate subscribe / subscriptions / unsubscribe ---------------------

func runSubscribe(c *cli, args []string) error {
	fs := c.newFlags("subscribe", "wakegate subscribe [--types T,…] [--subjects S,…] [--session ID [--subtree]] [--labels L,…] [--min-priority P] [--delivery wake|inbox] [--until subject_terminal|never|RFC3339] [--json]", `
Creates a subscription owned by the token's party (POST /v1/subscriptions):
matching events reach its inbox. At least one filter. Types are exact or
prefix.*; subjects exact (github:org/repo#12, session:<id>) or
github:org/repo#*. Subscribing to a subject that already ended delivers its
terminal event at once.`, "")
	a := addAPIFlags(fs)
	var types, subjects, labels listFlag
	fs.Var(&types, "types", "event types: exact or prefix.* (comma-separated, repeatable)")
	fs.Var(&subjects, "subjects", "subjects: exact or github:org/repo#* (comma-separated, repeatable)")
	fs.Var(&labels, "labels", "session labels (comma-separated, repeatable)")
	session := fs.String("session", "", "events about this session")
	subtree := fs.Bool("subtree", false, "with --session: its whole subtree")
	minPrio := fs.String("min-priority", "", "info (default), attention or critical")
	delivery := fs.String("delivery", "", "wake (default) or inbox (entries only, never a wake)")
	until := fs.String("until", "", "subject_terminal (one exact subject), never, or an RFC 3339 time")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *subtree && *session == "" {
		return usagef("--subtree needs --session")
	}
	req := client.SubscriptionRequest{Types: types, Subjects: subjects, Labels: labels, MinPriority: *minPrio,
		Delivery: *delivery, Until: *until}
	if *session != "" {
		req.Session = &client.SessionFilter{ID: strings.TrimPrefix(*session, "session:"), Scope: "self"}
		if *subtree {
			req.Session.Scope = "subtree"
		}
	}
	if len(req.Types)+len(req.Subjects)+len(req.Labels) == 0 && req.Session == nil {
		return usagef("at least one filter: --types, --subjects, --session or --labels")
	}
	cl, err := c.client(a)
	if err != nil {
		return err
	}
	s, err := cl.Subscribe(c.ctx, req)
	if err != nil {
		return err
	}
	if a.json {
		return c.printJSON(s)
	}
	fmt.Fprintf(c.stdout, "subscribed %s: %s\n", s.ID, describeSubscription(*s))
	if s.Closed {
		fmt.Fprintln(c.stdout, "the subject had already ended: its terminal event is in your inbox and the subscription is closed")
	}
	return nil
}

func runSubscriptions(c *cli, args []string) error {
	fs := c.newFlags("subscriptions", "wakegate subscriptions [--json]", `
Lists the token's party's live subscriptions (GET /v1/subscriptions).`, "")
	a := addAPIFlags(fs)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cl, err := c.client(a)
	if err != nil {
		return err
	}
	subs, err := cl.Subscriptions(c.ctx)
	if err != nil {
		return err
	}
	if a.json {
		if subs == nil {
			subs = []client.Subscription{}
		}
		return c.printJSON(map[string]any{"subscriptions": subs})
	}
	if len(subs) == 0 {
		fmt.Fprintln(c.stdout, "no subscriptions")
		return nil
	}
	t := &table{head: []string{"ID", "TYPES", "SUBJECTS", "SESSION", "MIN", "DELIVERY", "UNTIL", "CREATED"}}
	for _, s := range subs {
		sess := "-"
		if s.Session != nil {
			sess = s.Session.ID + "/" + s.Session.Scope
		}
		t.add(plain(s.ID), plain(dash(strings.Join(s.Types, ","))), plain(dash(strings.Join(s.Subjects, ","))), plain(sess),
			plain(s.MinPriority), plain(s.Delivery), plain(dash(s.Until)), plain(stamp(s.CreatedAt)))
	}
	t.render(c)
	return nil
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runUnsubscribe(c *cli, args []string) error {
	fs := c.newFlags("unsubscribe", "wakegate unsubscribe ID… [--json]", `
Deletes subscriptions of the token's party (DELETE /v1/subscriptions/{id}).`, "")
	a := addAPIFlags(fs)
	ids, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(ids) == 0 {
		return usagef("name the subscription id(s) to delete (wakegate subscriptions lists them)")
	}
	cl, err := c.client(a)
	if err != nil {
		return err
	}
	var deleted []string
	for _, id := range ids {
		if err := cl.Unsubscribe(c.ctx, id); err != nil {
			if a.json {
				_ = c.printJSON(map[string]any{"deleted": deleted})
			}
			return fmt.Errorf("%s: %s", id, describe(err))
		}
		deleted = append(deleted, id)
		if !a.json {
			fmt.Fprintf(c.stdout, "deleted %s\n", id)
		}
	}
	if a.json {
		return c.printJSON(map[string]any{"deleted": deleted})
	}
	return nil
}
