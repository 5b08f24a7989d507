package inbox

import (
	"crypto/sha1"
	"encoding/hex"

	"github.com/wakegate/wakegate/delivery/keyspace"
)

// Key builders: the Go side of the layout inbox.lua documents. Every key of
// one recipient starts with the deployment prefix (docs/design.md §14) and carries
// the recipient's hash tag, so each script touches one cluster slot:
//
//	<prefix>:{<prefix>:ib:<ws>:<party>}:n           string  last seq assigned (INCR)
//	<prefix>:{<prefix>:ib:<ws>:<party>}:e           hash    coalesce key → entry
//	<prefix>:{<prefix>:ib:<ws>:<party>}:u           zset    coalesce key scored by its entry's seq (the unacked entries)
//	<prefix>:{<prefix>:ib:<ws>:<party>}:w           zset    coalesce key scored by the seq of its latest waking update
//	<prefix>:{<prefix>:ib:<ws>:<party>}:d:<sha1>    string  dedup marker of one event, kept Retention
//	<prefix>:{<prefix>:ib:<ws>:<party>}:x           zset    coalesce key scored by its escalation's due ms (EscalationKey)
//
// Workspace and party ids cannot contain '{', '}' or anything but
// [A-Za-z0-9._-] after the party's kind (docs/design.md §2), so tags never collide.

// Tag returns the hash tag every key of one recipient shares.
func Tag(prefix, workspace, party string) string {
	return keyspace.RecipientTag(prefix, workspace, party)
}

// keys are the names of one recipient's keys.
type keys struct {
	base    string // <prefix>:<tag>
	last    string // :n
	entries string // :e
	unacked string // :u
	wakes   string // :w
	esc     string // :x
}

func (b *Inbox) keysOf(workspace, party string) keys {
	base := keyspace.Recipient(b.cfg.Prefix, workspace, party)
	return keys{
		base:    base,
		last:    base + ":n",
		entries: base + ":e",
		unacked: base + ":u",
		wakes:   base + ":w",
		esc:     base + ":x",
	}
}

// EscalationKey is a recipient's escalation due index (docs/design.md §8): a zset
// of coalesce key → the ms its entry's escalation check is due. Deliver
// arms it in the same step as the entry, Ack clears acked entries from
// it, and package escalate drains it. An empty prefix means keyspace.DefaultPrefix.
func EscalationKey(prefix, workspace, party string) string {
	return keyspace.Recipient(prefix, workspace, party) + ":x"
}

// marker is the dedup marker of the event (source, id) in this inbox.
func (k keys) marker(source, id string) string {
	sum := sha1.Sum([]byte(source + "\x00" + id))
	return k.base + ":d:" + hex.EncodeToString(sum[:])
}

// escalatedMarker is the dedup marker of the escalated copy of the event
// (source, id): the recipient may have the event itself already, through
// routing, and still gets the escalation once.
func (k keys) escalatedMarker(source, id string) string {
	return k.marker(source, id+"\x00escalated")
}

// NotifyChannel is the Pub/Sub channel Deliver publishes to for a
// recipient: payload "wake" when the update decided a wake or alert,
// UpdatePayload otherwise (inbox_deliver.lua; pushed.lua publishes
// "wake"). An empty prefix means the default keyspace.DefaultPrefix.
func NotifyChannel(prefix, workspace, party string) string {
	return notifyPrefix(prefix) + workspace + ":" + party
}

// UpdatePayload is the NotifyChannel payload of an update that decided no
// wake: the inbox's wake index (:w) is as it was, so a reader waiting for
// a wake has nothing new to read (docs/design.md §4).
const UpdatePayload = "update"

func notifyPrefix(prefix string) string { return keyspace.InboxNotify(prefix) }

func prefixOr(prefix string) string {
	if prefix == "" {
		return keyspace.DefaultPrefix
	}
	return prefix
}
