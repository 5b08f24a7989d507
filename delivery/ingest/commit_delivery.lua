-- commit_delivery.lua: is the GitHub commit point.
-- Rule: docs/design.md §1 the commit point; §3 GitHub dedup.
--
-- KEYS[1] dedup marker "<in>:dd:<hook>:<guid>"
-- KEYS[2] body marker  "<in>:bh:<sha256(repo, body)>"
-- KEYS[3] raw delivery "<in>:raw:<guid>:<hook>"
-- KEYS[4] ingest stream "<in>:ingest"
-- ARGV[1] ttl seconds, ARGV[2] raw record, ARGV[3] "1" to pass dedup (replay),
-- ARGV[4] guid, ARGV[5] hook, ARGV[6] "1" to write an ingest record,
-- ARGV[7] ingest stream maxlen, ARGV[8] the normalized fact ("" for none),
-- ARGV[9] workspace (written beside a fact)
-- Returns {0, ingest id or ""} committed, {1, ""} duplicate guid,
-- {2, first guid} duplicate body.

local ttl = tonumber(ARGV[1])
if ARGV[3] ~= '1' then
  local seen = redis.call('MGET', KEYS[1], KEYS[2])
  if seen[1] then return {1, ''} end
  if seen[2] then return {2, seen[2]} end
end
-- data first, markers after: within one script it is atomic either way,
-- but this is the order that stays safe if the script is ever split.
redis.call('SET', KEYS[3], ARGV[2], 'EX', ttl, 'NX')
local id = ''
if ARGV[6] == '1' and ARGV[8] ~= '' then
  id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*', 'g', ARGV[4], 'h', ARGV[5], 'r', ARGV[3],
    'w', ARGV[9], 'f', ARGV[8])
elseif ARGV[6] == '1' then
  id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*', 'g', ARGV[4], 'h', ARGV[5], 'r', ARGV[3])
end
redis.call('SET', KEYS[1], '1', 'EX', ttl)
redis.call('SET', KEYS[2], ARGV[4], 'EX', ttl, 'NX')
return {0, id}
