-- apply_one.lua: the entry of the apply script (after apply.lua): one fact.
-- Rule: docs/design.md §3 the PR tracker and PR readiness.
--
-- KEYS[1]    = "<tag>:journal" of the repository's shard (routes the script)
-- ARGV[1..3] = journal.AppendArgs()
-- ARGV[4]    = tag
-- ARGV[5]    = input JSON, ARGV[6] = data (see apply.lua)
--
-- Returns tr_apply's reply (apply.lua): {"ok", stream ids appended...} or
-- {"need", base...}.
--
-- Preceded by delivery/journal/journal.lua, tracker.lua and apply.lua.

wg_config(ARGV[1], ARGV[2], ARGV[3])
local input = cjson.decode(ARGV[5])
return tr_apply(input, ARGV[6], input)
