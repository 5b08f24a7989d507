-- append.lua: journals one event idempotently (docs/design.md §2: once
-- per (source, id)).
--
-- KEYS[1] = "<tag>:journal" of the event's shard
-- ARGV[1..3] = Journal.AppendArgs; ARGV[4] = tag, ARGV[5] = event JSON,
-- ARGV[6] = workspace, ARGV[7] = source, ARGV[8] = id; for a terminal
-- event ARGV[9..12] = subject, type, time, summary (else absent).
-- Returns {stream id, 1 if appended else 0}.
--
-- Preceded by journal.lua.

wg_config(ARGV[1], ARGV[2], ARGV[3])
local sid, added = wg_append(ARGV[4], ARGV[5], ARGV[6], ARGV[7], ARGV[8])
if added == 1 and ARGV[9] then
  wg_terminal(ARGV[4], ARGV[6], ARGV[9], ARGV[10], ARGV[11], ARGV[12], sid)
end
return {sid, added}
