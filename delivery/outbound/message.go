package outbound

import (
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/wakegate/wakegate/delivery/inbox"
)

// WebhookID is the webhook-id of the push of one inbox update: derived
// from the deployment prefix, the workspace, the party and the update's
// inbox seq, so a re-run of the routing that decided the wake finds the
// same id (and Asynq's task id dedup keeps it to one push). It has no '.'
// (Standard Webhooks signs "<id>.<ts>.<body>").
func WebhookID(prefix, workspace, party string, seq int64) string {
	sum := sha256.Sum256([]byte(prefixOr(prefix) + "\x00" + workspace + "\x00" + party + "\x00" + strconv.FormatInt(seq, 10)))
	return "msg_" + strings.ToLower(base32.StdEncoding.WithPadding(base32.NoPadding).EncodeToString(sum[:20]))
}

// Message is what one push says, fixed when the wake is decided.
type Message struct {
	WebhookID string
	Kind      string // the update's kind: wake or alert; digest for a digest
	Party     string
	// Entry is the inbox entry as the update left it (its settings
	// snapshot is left out); nil for a digest.
	Entry *inbox.Entry
	// Event is the CloudEvent that caused the wake.
	Event json.RawMessage
	// Digest lists the entries of a digest push.
	Digest []inbox.Entry
	// Text is a digest's one line a person reads ("[quiet lifted 02:50Z;
	// held 02:12Z–02:51Z; 7 events] merged: #12 #13 · …"); empty otherwise.
	Text string
	// Escalated marks what reaches a party by escalation.
	Escalated bool
}

// standardBody is the standard format (docs/design.md §8), in the order a person
// reads it.
type standardBody struct {
	WebhookID string          `json:"webhook_id"`
	Kind      string          `json:"kind"`
	Party     string          `json:"party"`
	Escalated bool            `json:"escalated,omitempty"`
	Entry     *inbox.Entry    `json:"entry,omitempty"`
	Event     json.RawMessage `json:"event,omitempty"`
	Text      string          `json:"text,omitempty"`
	Digest    []inbox.Entry   `json:"digest,omitempty"`
}

// Render returns the body of m in format (FormatStandard or FormatSlack).
// The bytes are what is signed and sent on every attempt.
func Render(format string, m Message) ([]byte, error) {
	switch format {
	case FormatStandard, "":
		b := standardBody{WebhookID: m.WebhookID, Kind: m.Kind, Party: m.Party, Escalated: m.Escalated, Event: m.Event, Text: m.Text}
		if m.Entry != nil {
			e := *m.Entry
			e.Settings = nil
			b.Entry = &e
		}
		for _, e := range m.Digest {
			e.Settings = nil
			b.Digest = append(b.Digest, e)
		}
		return json.Marshal(b)
	case FormatSlack:
		return json.Marshal(struct {
			Text string `json:"text"`
		}{slackText(m)})
	}
	return nil, invalid("format %q: want standard or slack", format)
}

// slackEscape escapes what Slack's mrkdwn reads as markup.
var slackEscape = strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")

// slackText is a push as a person reads it.
func slackText(m Message) string {
	var b strings.Builder
	kind := m.Kind
	if kind == "" {
		kind = inbox.KindWake
	}
	fmt.Fprintf(&b, "*%s%s for %s*", strings.ToUpper(kind[:1]), kind[1:], slackEscape.Replace(m.Party))
	if m.Escalated {
		b.WriteString(" (escalated)")
	}
	line := func(e inbox.Entry) string {
		what := e.Summary
		if what == "" {
			what = e.Type
		}
		s := slackEscape.Replace(what)
		if e.Subject != "" {
			s += " — " + slackEscape.Replace(e.Subject)
		}
		if e.Count > 1 {
			s += fmt.Sprintf(" (×%d)", e.Count)
		}
		return s + " `" + e.Type + "` " + string(e.Priority)
	}
	if m.Entry != nil {
		b.WriteString("\n" + line(*m.Entry))
	}
	if m.Text != "" {
		b.WriteString("\n" + slackEscape.Replace(m.Text))
	}
	if len(m.Digest) > 0 {
		fmt.Fprintf(&b, " — %d entries", len(m.Digest))
		for _, e := range m.Digest {
			b.WriteString("\n• " + line(e))
		}
	}
	return b.String()
}
