-- keys.lua (a test's, not wakegate's): answers the key names tracker.lua
-- and journal.lua build, for TestLuaKeysAreKeyspaces to hold them equal
-- to keyspace.Shard's (docs/design.md §14).
--
-- KEYS[1] = "<tag>:journal" (routes the script); ARGV[1] tag, ARGV[2]
-- repo, ARGV[3] PR number, ARGV[4] sha, ARGV[5] guid, ARGV[6] source,
-- ARGV[7] id, ARGV[8] workspace, ARGV[9] subject.
-- Returns {k_pr, k_reviews, k_index, k_checks, k_settle, k_resolved,
-- wg_eid, wg_term}.

tr_init(ARGV[1], {})
return {
  k_pr(ARGV[2], tonumber(ARGV[3])), k_reviews(ARGV[2], tonumber(ARGV[3])),
  k_index(ARGV[2], ARGV[4]), k_checks(ARGV[2], ARGV[4]), k_settle(), k_resolved(ARGV[5]),
  wg_eid(ARGV[1], ARGV[6], ARGV[7]), wg_term(ARGV[1], ARGV[8], ARGV[9]),
}
