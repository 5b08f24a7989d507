-- seen.lua: the stream id (source, id) was journaled under in one shard,
-- while its dedup marker lives (docs/design.md §2 "The dedup window"):
-- the lookup an append makes (wg_seen), for Journal.Lookup and Find.
--
-- KEYS[1] = "<tag>:journal" of the shard
-- ARGV[1..3] = Journal.AppendArgs; ARGV[4] = tag, ARGV[5] = source,
-- ARGV[6] = id.
-- Returns the stream id, or nil when there is no marker. Like an append's
-- first lookup, it sets the shard's marker epochs when they are missing.
--
-- Preceded by marks.lua and journal.lua.

wg_config(ARGV[1], ARGV[2], ARGV[3])
return wg_seen(ARGV[4], ARGV[5], ARGV[6])
