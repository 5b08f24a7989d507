-- settle.lua: re-evaluate the PRs of one shard whose settle time has come
-- (no required checks and nothing reported at its head when it was
-- scheduled), one member after the other, in one call: one call per
-- member was one round trip per PR, and a burst of PRs opened together
-- comes due together. Claiming each member with ZREM inside the script
-- makes the work happen once when several settlers run; the evaluation is
-- idempotent anyway.
-- Rule: docs/design.md §3 PR readiness: the settle time.
--
-- KEYS[1]    = "<tag>:journal" of the shard (routes the script)
-- ARGV[1..3] = journal.AppendArgs()
-- ARGV[4]    = tag
-- ARGV[5]    = n, the number of members
-- ARGV[4+2i] = member i of "<tag>:settle": "<ws>\n<repo>\n<number>\n<sha>"
-- ARGV[5+2i] = its context JSON: now_ms, now_time, settle_ms, retention
--              (s), req (base → required check names of the member's repo);
--              decoded once for a run of members passing the same one
--
-- Returns one reply per member, in order: {"ok", stream ids appended...}
-- when it claimed the member, {"gone"} when another settler did (a member
-- claimed before its due, its head having come back since the caller read
-- it, is scheduled again by the evaluation). It stops after the first {"need", base}: that member wrote
-- nothing and the members after it did not run (the caller passes the
-- base's required checks and runs them again).

wg_config(ARGV[1], ARGV[2], ARGV[3])

local function settle(member, c)
  tr_init(ARGV[4], c)
  SIDS = {}
  local ws, repo, n, sha = string.match(member, '^([^\n]*)\n([^\n]*)\n(%d+)\n([^\n]*)$')
  if not ws then
    redis.call('ZREM', k_settle(), member) -- not ours: drop it
    return { 'gone' }
  end
  n = tonumber(n)

  local h = pr_hash(k_pr(repo, n))
  local missing = missing_required({ h.base })
  if #missing > 0 then
    table.insert(missing, 1, 'need')
    return missing
  end

  -- The caller read the member due at its now. No ZSCORE first: a
  -- member whose head came back since (a later due) and is taken here is
  -- scheduled again by evaluate (checks_pass) while its due is ahead.
  if redis.call('ZREM', k_settle(), member) == 0 then return { 'gone' } end
  evaluate(ws, repo, n, sha, h)
  table.insert(SIDS, 1, 'ok')
  return SIDS
end

local out = {}
local ctx_json, ctx -- the last context decoded (members of one repository share it)
for i = 1, tonumber(ARGV[5]) do
  if ARGV[5 + 2 * i] ~= ctx_json then
    ctx_json = ARGV[5 + 2 * i]
    ctx = cjson.decode(ctx_json)
  end
  local r = settle(ARGV[4 + 2 * i], ctx)
  out[i] = r
  if r[1] == 'need' then break end
end
return out
