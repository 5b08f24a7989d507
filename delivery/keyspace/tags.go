package keyspace

import "strconv"

// The hash tags of docs/design.md §14 other than the shards', each the
// key prefix of one unit of state, hash tag included: a package appends
// its own suffixes (":subs", ":ctl:<session>", …) and documents them.
// The strings are those of earlier releases: two tag styles live on
// ("{sup:<ws>}" and "{<p>:ib:<ws>:<party>}"), since renaming a key of a
// running deployment would strand its data (docs/design.md, "Decisions
// taken in the build").

// Subscriptions is a workspace's subscriptions: "<p>:{sub:<ws>}".
func Subscriptions(prefix, workspace string) string {
	return PrefixOr(prefix) + ":{sub:" + workspace + "}"
}

// Supervision is a workspace's supervision edges and settings:
// "<p>:{sup:<ws>}".
func Supervision(prefix, workspace string) string {
	return PrefixOr(prefix) + ":{sup:" + workspace + "}"
}

// Health is a workspace's health sweep state: "<p>:{hl:<ws>}".
func Health(prefix, workspace string) string {
	return PrefixOr(prefix) + ":{hl:" + workspace + "}"
}

// RecipientTag is the hash tag alone of one recipient's inbox, holds and
// escalation keys: "{<p>:ib:<ws>:<party>}".
func RecipientTag(prefix, workspace, party string) string {
	return "{" + PrefixOr(prefix) + ":ib:" + workspace + ":" + party + "}"
}

// Recipient is the key prefix of one recipient: "<p>:{<p>:ib:<ws>:<party>}".
func Recipient(prefix, workspace, party string) string {
	return PrefixOr(prefix) + ":" + RecipientTag(prefix, workspace, party)
}

// Quiet is a workspace's quiet records and held recipients:
// "<p>:{<p>:hq:<ws>}".
func Quiet(prefix, workspace string) string {
	return PrefixOr(prefix) + ":{" + PrefixOr(prefix) + ":hq:" + workspace + "}"
}

// Endpoint is one party's push endpoint and circuit breaker:
// "<p>:{<p>:push:<ws>:<party>}".
func Endpoint(prefix, workspace, party string) string {
	return PrefixOr(prefix) + ":{" + PrefixOr(prefix) + ":push:" + workspace + ":" + party + "}"
}

// DeadLetters is the pushes' dead letters: "<p>:{<p>:push:dead}".
func DeadLetters(prefix string) string {
	return PrefixOr(prefix) + ":{" + PrefixOr(prefix) + ":push:dead}"
}

// RateLimit is a workspace's ingest limits: "<p>:{<p>:rl:<ws>}".
func RateLimit(prefix, workspace string) string {
	return PrefixOr(prefix) + ":{" + PrefixOr(prefix) + ":rl:" + workspace + "}"
}

// Keys in no script with another, so without a hash tag.

// RouteWorkers is the routing workers' heartbeats (zset).
func RouteWorkers(prefix string) string { return PrefixOr(prefix) + ":route:workers" }

// SubscriptionExpiry is the expiry index of every subscription (zset).
func SubscriptionExpiry(prefix string) string { return PrefixOr(prefix) + ":sub:expiry" }

// PushSent marks a delivered push (a day).
func PushSent(prefix, id string) string { return PrefixOr(prefix) + ":push:sent:" + id }

// PushBody is a push's body awaiting its attempts.
func PushBody(prefix, id string) string { return PrefixOr(prefix) + ":push:body:" + id }

// PushQueue is Asynq queue k of pushes, hold releases and escalations:
// queue 0 keeps the single queue's name of earlier versions, "<p>:push";
// queue k > 0 is "<p>:push:<k>".
func PushQueue(prefix string, k int) string {
	if k == 0 {
		return PrefixOr(prefix) + ":push"
	}
	return PrefixOr(prefix) + ":push:" + strconv.Itoa(k)
}

// ScheduleClaim is the claim of a periodic job's slot.
func ScheduleClaim(prefix, job string, slot int64) string {
	return PrefixOr(prefix) + ":sched:" + job + ":" + strconv.FormatInt(slot, 10)
}

// HealthPos is the health sweep's stream positions (hash).
func HealthPos(prefix string) string { return PrefixOr(prefix) + ":health:pos" }

// HealthWorkspaces is the workspaces the health sweep visits.
func HealthWorkspaces(prefix string) string { return PrefixOr(prefix) + ":health:ws" }

// GitHubApp is the key prefix of the GitHub App's state: "<p>:ghapp".
func GitHubApp(prefix string) string { return PrefixOr(prefix) + ":ghapp" }

// JournalNotify is the Pub/Sub channel prefix of journal appends; the
// workspace follows.
func JournalNotify(prefix string) string { return PrefixOr(prefix) + ":notify:journal:" }

// InboxNotify is the Pub/Sub channel prefix of inbox wake-ups.
func InboxNotify(prefix string) string { return PrefixOr(prefix) + ":ib:notify:" }

// RouteWorker is the claim of a routing worker's identity.
func RouteWorker(prefix, name string) string { return PrefixOr(prefix) + ":route:worker:" + name }
