-- apply_batch.lua: the entry of the batch apply script (after apply.lua):
-- several facts about repositories of one shard, folded in one after the
-- other, in the order given, each exactly as apply_one.lua would fold it.
-- One call instead of one per delivery: the deriver's round trips, not
-- Redis, bounded how fast it could fold a busy repository's deliveries.
-- Rule: docs/design.md §3 the PR tracker and PR readiness.
--
-- KEYS[1]    = "<tag>:journal" of the shard (routes the script)
-- ARGV[1..3] = journal.AppendArgs()
-- ARGV[4]    = tag
-- ARGV[5]    = n, the number of facts
-- ARGV[3+3i] = the context of fact i (1 ≤ i ≤ n): now_ms, now_time,
--              settle_ms, retention, req, as in apply_one.lua's input;
--              decoded once for a run of facts passing the same one (the
--              facts of one repository)
-- ARGV[4+3i], ARGV[5+3i] = input JSON (without the context) and data of
--              fact i, as ARGV[5] and ARGV[6] of apply_one.lua
--
-- Returns one reply per fact folded in, in order, as apply_one.lua's. It
-- stops after the first {"need", base...}: that fact wrote nothing and the
-- facts after it did not run (the caller passes the missing required
-- checks and runs them again).

wg_config(ARGV[1], ARGV[2], ARGV[3])
local out = {}
local ctx_json, ctx -- the last context decoded
for i = 1, tonumber(ARGV[5]) do
  if ARGV[3 + 3 * i] ~= ctx_json then
    ctx_json = ARGV[3 + 3 * i]
    ctx = cjson.decode(ctx_json)
  end
  local r = tr_apply(cjson.decode(ARGV[4 + 3 * i]), ARGV[5 + 3 * i], ctx)
  out[i] = r
  if r[1] == 'need' then break end
end
return out
