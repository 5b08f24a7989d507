-- settle.lua: re-evaluate one PR whose settle time has come (no required
-- checks and nothing reported at its head when it was scheduled). Claiming
-- the member with ZREM inside the script makes the work happen once when
-- several settlers run; the evaluation is idempotent anyway.
--
-- KEYS[1]    = "<tag>:journal" of the shard (routes the script)
-- ARGV[1..3] = journal.AppendArgs()
-- ARGV[4]    = tag
-- ARGV[5]    = member of "<tag>:settle": "<ws>\n<repo>\n<number>\n<sha>"
-- ARGV[6]    = context JSON: now_ms, now_time, settle_ms, retention (s),
--              req (base → required check names of the member's repo)
--
-- Returns {"ok", stream ids appended...} when it claimed the member,
-- {"gone"} when another settler did or it is not due yet, or {"need", base}
-- without having written anything when the base's required checks were
-- not passed in req.

wg_config(ARGV[1], ARGV[2], ARGV[3])
tr_init(ARGV[4], cjson.decode(ARGV[6]))
local member = ARGV[5]
local ws, repo, n, sha = string.match(member, '^([^\n]*)\n([^\n]*)\n(%d+)\n([^\n]*)$')
if not ws then
  redis.call('ZREM', k_settle(), member) -- not ours: drop it
  return { 'gone' }
end
n = tonumber(n)

local due = redis.call('ZSCORE', k_settle(), member)
if not due or tonumber(due) > NOW_MS then return { 'gone' } end

local missing = missing_required({ redis.call('HGET', k_pr(repo, n), 'base') or nil })
if #missing > 0 then
  table.insert(missing, 1, 'need')
  return missing
end

redis.call('ZREM', k_settle(), member)
evaluate(ws, repo, n, sha)
table.insert(SIDS, 1, 'ok')
return SIDS
