package keyspace

import (
	"crypto/sha1"
	"encoding/hex"
	"strconv"
)

// Shard is journal shard N's hash tag, "<p>:{j<N>}": every key below is
// in its slot — the journal and its dedup markers, the routing lease and
// cursor, the delivery ledger, and the state derived with the shard's
// events (PR trackers, session records), so that one script appends and
// updates them together. The Lua side builds the same names in
// delivery/journal/journal.lua (wg_eid, wg_term) and
// delivery/tracker/tracker.lua (k_pr, …); their tests hold the two equal.
type Shard string

// JournalShard is shard n of the journal under prefix.
func JournalShard(prefix string, n int) Shard {
	return Shard(PrefixOr(prefix) + ":{j" + strconv.Itoa(n) + "}")
}

// Tag is the shard's key prefix, hash tag included; scripts get it in
// ARGV and build the shard's keys from it.
func (s Shard) Tag() string { return string(s) }

// Journal is the shard's stream.
func (s Shard) Journal() string { return string(s) + ":journal" }

// Eid is the marker of (source, id) as the previous version wrote it, one
// key each (wg_eid): still honoured until it expires. Redelivery claims
// keep its name.
func (s Shard) Eid(source, id string) string {
	sum := sha1.Sum([]byte(source + "\x00" + id))
	return string(s) + ":eid:" + hex.EncodeToString(sum[:])
}

// Markers is the previous version's hash of the dedup markers of (source,
// id)s appended in the period starting at start (Unix seconds) whose hex
// sha1 begins with xx (two digits): wg_markers, read while MarksEpoch says
// they may be there (docs/design.md §2 "The dedup window").
func (s Shard) Markers(start int64, xx string) string {
	return string(s) + ":em:" + strconv.FormatInt(start, 10) + ":" + xx
}

// MarkerEpoch holds when the shard's appends began writing period-hash
// markers (Unix seconds; "0": its journal was empty, no Eid marker to
// honour): wg_legacy stops reading Eid markers a retention after it.
func (s Shard) MarkerEpoch() string { return string(s) + ":emepoch" }

// Marks is the shard's set of dedup markers (delivery/journal/marks.lua,
// docs/design.md §2 "The dedup window").
func (s Shard) Marks() MarkSet { return MarkSet(string(s) + ":lh") }

// MarksEpoch holds when the shard's first lookup of a Marks marker was
// (Unix seconds; "0": its journal was empty, no Markers hash to honour):
// wg_state stops reading Markers hashes a retention after it.
func (s Shard) MarksEpoch() string { return string(s) + ":lhepoch" }

// MarkSet is a set of markers kept by period in buckets grown by linear
// hashing (delivery/journal/marks.lua: wg_mk_key builds the same names),
// named by its base key.
type MarkSet string

// Count is the string counting the markers of the period starting at
// start (Unix seconds).
func (m MarkSet) Count(start int64) string { return string(m) + ":" + strconv.FormatInt(start, 10) }

// Bucket is bucket b of the period starting at start: a hash (set) of
// markers.
func (m MarkSet) Bucket(start, b int64) string {
	return m.Count(start) + ":" + strconv.FormatInt(b, 10)
}

// Term is the terminal record of a subject (wg_terminal).
func (s Shard) Term(workspace, subject string) string {
	return string(s) + ":term:" + workspace + ":" + subject
}

// Lease is the routing lease of the shard; Epoch its fencing counter.
func (s Shard) Lease() string { return string(s) + ":lease" }

// Epoch is the fencing epoch counter of the shard's routing lease.
func (s Shard) Epoch() string { return string(s) + ":epoch" }

// Cursor is the last entry the shard's router has routed.
func (s Shard) Cursor() string { return string(s) + ":cursor" }

// Ledger is the shard's delivery ledger (stream).
func (s Shard) Ledger() string { return string(s) + ":ledger" }

// RoutePoison is the stream of events routing set aside.
func (s Shard) RoutePoison() string { return string(s) + ":route:poison" }

// Batches is the stream of agent batches across shards not yet fanned out.
func (s Shard) Batches() string { return string(s) + ":batches" }

// Party is the registry record of a party (a session's record).
func (s Shard) Party(workspace, party string) string {
	return string(s) + ":party:" + workspace + ":" + party
}

// Pause is the marker of a session paused until a time.
func (s Shard) Pause(workspace, party string) string {
	return string(s) + ":pause:" + workspace + ":" + party
}

// PR is a pull request's tracker (hash); tracker.lua's k_pr.
func (s Shard) PR(repo string, n int) string {
	return string(s) + ":pr:" + repo + "#" + strconv.Itoa(n)
}

// Reviews is a pull request's reviews (hash); tracker.lua's k_reviews.
func (s Shard) Reviews(repo string, n int) string { return s.PR(repo, n) + ":reviews" }

// Checks is the check results at one sha (hash); tracker.lua's k_checks.
func (s Shard) Checks(repo, sha string) string {
	return string(s) + ":checks:" + repo + "@" + sha
}

// Settle is the shard's settle index (zset); tracker.lua's k_settle.
func (s Shard) Settle() string { return string(s) + ":settle" }

// IngestShard is ingest shard N's hash tag, "<p>:{in<N>}": its stream of
// committed GitHub deliveries, their dedup markers and raw bodies.
type IngestShard string

// Ingest is ingest shard n under prefix.
func Ingest(prefix string, n int) IngestShard {
	return IngestShard(PrefixOr(prefix) + ":{in" + strconv.Itoa(n) + "}")
}

// Tag is the shard's key prefix, hash tag included.
func (s IngestShard) Tag() string { return string(s) }

// Stream is the shard's stream of ingest records.
func (s IngestShard) Stream() string { return string(s) + ":ingest" }

// Dedup is the marker of a delivery (hook, guid) that v1 raw records
// were written with (the raw record's existence is the dedup since).
func (s IngestShard) Dedup(hook, guid string) string {
	return string(s) + ":dd:" + hook + ":" + guid
}

// Body is the v1 marker of a delivery's body (hex of its sha256), read
// while v1 records live.
func (s IngestShard) Body(sumHex string) string { return string(s) + ":bh:" + sumHex }

// BodyMarker is the marker of a delivery's body (hex of the first 16
// bytes of its sha256).
func (s IngestShard) BodyMarker(sum16Hex string) string { return string(s) + ":bm:" + sum16Hex }

// StoredBodyMarker is the marker of a delivery's body by its stored form
// (docs/design.md §14: the hash of the repository, the objects' hashes,
// where they go and the rest, so that the body is hashed once) as the
// previous version wrote it, one key each: read while BodyMarksEpoch says
// one may be there.
func (s IngestShard) StoredBodyMarker(sum16Hex string) string { return string(s) + ":bs:" + sum16Hex }

// MarkerEpoch holds when the shard's commits began writing stored-form
// body markers (unix ms; "0": no marker of before to honour).
func (s IngestShard) MarkerEpoch() string { return string(s) + ":bsepoch" }

// BodyMarks is the shard's set of body markers (docs/design.md §14; the
// period sets of delivery/journal/marks.lua): StoredBodyMarker keys are
// no longer written.
func (s IngestShard) BodyMarks() MarkSet { return MarkSet(string(s) + ":lb") }

// BodyMarksEpoch holds when the shard's commits began writing BodyMarks
// (unix ms; "0": the shard's stream had no record, no StoredBodyMarker to
// honour).
func (s IngestShard) BodyMarksEpoch() string { return string(s) + ":lbepoch" }

// Object is a shared sub-object raw records reference, by its hash.
func (s IngestShard) Object(sumHex string) string { return string(s) + ":obj:" + sumHex }

// Raw is a committed delivery's raw record.
func (s IngestShard) Raw(guid, hook string) string { return string(s) + ":raw:" + guid + ":" + hook }

// Poison is the stream of ingest records derivation set aside.
func (s IngestShard) Poison() string { return string(s) + ":poison" }

// Index is the set of PR numbers that have had sha as head; tracker.lua's
// k_index.
func (s Shard) Index(repo, sha string) string { return string(s) + ":sha:" + repo + "@" + sha }

// Resolved is the PR numbers a check delivery was journaled under;
// tracker.lua's k_resolved.
func (s Shard) Resolved(guid string) string { return string(s) + ":resolved:" + guid }

// RedeliveryClaim is the claim of one redelivery of (source, id).
func (s Shard) RedeliveryClaim(source, id string) string { return s.Eid(source, id) + ":claim" }
