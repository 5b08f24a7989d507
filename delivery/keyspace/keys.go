// Package keyspace is wakegate's Redis layout (docs/design.md §14, "Redis
// key layout" and "Lua scripts"): the default key prefix, the builders of
// the keys and hash tags that several packages share, the cluster slot of
// a key, and the registry of every Lua script (Script), whose tests check
// that each call's KEYS hash to one slot.
//
// It imports nothing of wakegate, so every package — providers/,
// delivery/, workers/, gateway/, cmd/ — can build its keys here.
package keyspace

// DefaultPrefix starts every key and Pub/Sub channel when
// WAKEGATE_REDIS_PREFIX is not set.
const DefaultPrefix = "wg"

// PrefixOr answers prefix, or DefaultPrefix when it is empty.
func PrefixOr(prefix string) string {
	if prefix == "" {
		return DefaultPrefix
	}
	return prefix
}
