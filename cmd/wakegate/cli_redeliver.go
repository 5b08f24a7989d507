package main

// wakegate redeliver delivery|event: the operators' redeliveries (docs/design.md
// §11) from the shell.

import (
	"fmt"
	"strconv"

	"github.com/wakegate/wakegate/providers/agent/client"
	"github.com/wakegate/wakegate/providers/event"
)

const redeliverAbout = `
Redelivery (scope operator):

  delivery GUID   re-derives a stored GitHub delivery
                  (POST /admin/deliveries/{guid}/redeliver): derivations are
                  idempotent on fact ids, so only what is missing from the
                  journal is produced — a repair after a crash or a fixed
                  bug. It is found by the GUID GitHub shows, under
                  whichever hook scope (the App, or a repository or
                  organization webhook) holds it; when several do, the
                  answer lists them and --hook names one (its
                  X-GitHub-Hook-Installation-Target-ID).
  event ID        delivers a journaled event again
                  (POST /admin/events/{id}/redeliver), found by --source and
                  its id, to its recipients as the router resolves them now,
                  or to --party alone, bypassing the inboxes' dedup: each
                  gets a new update marked redelivered, and wakes are pushed
                  as usual.

Each is recorded in the journal as a wakegate.redelivered event naming the
token's subject. A retry after a lost answer is safe: the gateway answers it
with the first result.`

func runRedeliver(c *cli, args []string) error {
	if len(args) > 0 {
		switch args[0] {
		case "delivery":
			return redeliverDelivery(c, args[1:])
		case "event":
			return redeliverEvent(c, args[1:])
		}
	}
	fs := c.newFlags("redeliver", "wakegate redeliver delivery GUID [--hook ID] | event ID --source SRC [--party P]", redeliverAbout, "")
	pos, err := parse(fs, args) // --help
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("want delivery GUID, or event ID --source SRC")
	}
	return usagef("unknown redeliver target %q: want delivery or event", pos[0])
}

func redeliverDelivery(c *cli, args []string) error {
	fs := c.newFlags("redeliver", "wakegate redeliver delivery GUID [--hook ID] [--json]", redeliverAbout, "")
	a := addAPIFlags(fs)
	hook := fs.String("hook", "", "the hook scope it was stored under: its X-GitHub-Hook-Installation-Target-ID (default: whichever holds it; needed only when several do)")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usagef("want one delivery GUID (X-GitHub-Delivery)")
	}
	if *hook != "" {
		if _, err := strconv.ParseUint(*hook, 10, 64); err != nil {
			return usagef("--hook %q must be digits", *hook)
		}
	}
	cl, err := c.client(a)
	if err != nil {
		return err
	}
	r, err := cl.RedeliverDelivery(c.ctx, pos[0], *hook)
	if err != nil {
		return err
	}
	if a.json {
		return c.printJSON(r)
	}
	what := r.Event
	if r.Repo != "" {
		what += " of " + r.Repo
	}
	head := fmt.Sprintf("delivery %s (%s)", r.GUID, what)
	switch {
	case r.Status == "ignored":
		fmt.Fprintf(c.stdout, "%s: nothing to derive — %s\n", head, r.Reason)
	case len(r.Produced) == 0:
		fmt.Fprintf(c.stdout, "%s: nothing was missing; no event produced\n", head)
	default:
		fmt.Fprintf(c.stdout, "%s: %s produced\n", head, c.paint(sgrBold, plural(len(r.Produced), "1 event", strconv.Itoa(len(r.Produced))+" events")))
		t := &table{head: []string{"SEQ", "TYPE", "SUBJECT", "ID"}}
		for _, p := range r.Produced {
			t.add(plain(p.Seq), plain(p.Type), plain(dash(p.Subject)), plain(p.ID))
		}
		t.render(c)
	}
	c.recorded(r.Journaled, r.RequestID, r.Duplicate)
	return nil
}

func redeliverEvent(c *cli, args []string) error {
	fs := c.newFlags("redeliver", "wakegate redeliver event ID --source SRC [--party P] [--subject S] [--json]", redeliverAbout, "")
	a := addAPIFlags(fs)
	source := fs.String("source", "", "the event's CloudEvents source, such as //github.com/org/repo or //wakegate/<ws>/session:<id> (required)")
	party := fs.String("party", "", "deliver to this party only (session:<id> or human:<channel>)")
	subject := fs.String("subject", "", "the event's subject, when its id was journaled about several")
	pos, err := parse(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) != 1:
		return usagef("want one event id")
	case *source == "":
		return usagef("--source is required (an event is its source and id)")
	}
	if *party != "" {
		if _, err := event.ParseParty(*party); err != nil {
			return usagef("--party: %v", err)
		}
	}
	cl, err := c.client(a)
	if err != nil {
		return err
	}
	r, err := cl.RedeliverEvent(c.ctx, client.EventRedeliveryRequest{ID: pos[0], Source: *source, Party: *party, Subject: *subject})
	if err != nil {
		return err
	}
	if a.json {
		return c.printJSON(r)
	}
	head := fmt.Sprintf("%s %s about %s", r.Type, r.ID, dash(r.Subject))
	if len(r.Delivered) == 0 {
		fmt.Fprintf(c.stdout, "%s: nobody to deliver it to now\n", head)
	} else {
		fmt.Fprintf(c.stdout, "%s: redelivered to %s\n", head, c.paint(sgrBold, plural(len(r.Delivered), "1 party", strconv.Itoa(len(r.Delivered))+" parties")))
		t := &table{head: []string{"PARTY", "VIA", "INBOX SEQ", "KIND", "WAKE"}}
		for _, d := range r.Delivered {
			wake := "no"
			if d.Wake {
				wake = "yes"
			}
			t.add(cell{d.Party, sgrBold}, plain(d.Via), plain(strconv.FormatInt(d.InboxSeq, 10)), cell{d.Kind, kindColor(d.Kind)}, plain(wake))
		}
		t.render(c)
	}
	c.recorded(r.Journaled, r.RequestID, r.Duplicate)
	return nil
}

// recorded says where the redelivery is recorded in the journal.
func (c *cli) recorded(seq, requestID string, duplicate bool) {
	if seq == "" {
		return
	}
	line := "recorded as wakegate.redelivered at " + seq
	if duplicate {
		line += " (request " + requestID + " had been answered: this is its first result, nothing was done again)"
	}
	fmt.Fprintln(c.stdout, c.paint(sgrDim, line))
}
