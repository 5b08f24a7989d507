-- decide.lua: the per-recipient part of the holds decision (docs/design.md §7,
-- order quiet → PAUSED → attended → rate cap → channel) for one inbox
-- update that decided a wake, as one atomic step. Quiet, quiet hours and
-- PAUSED are decided by the caller (they are read from the workspace's
-- quiet records, its settings and the recipient's presence) and passed in
-- ARGV[2]; attended is already
-- folded into the update's kind by the inbox; this script applies the rate
-- cap and records what was held.
--
-- KEYS[1] = <tag>:hold:dec   hash   inbox seq → outcome (idempotence: a
--                                    re-run of the routing answers the
--                                    original outcome and consumes nothing)
-- KEYS[2] = <tag>:hold:rate  hash   token bucket: tok (tokens left), t (ms
--                                    of the last refill tick)
-- KEYS[3] = <tag>:hold:q:<reason>  list of held items (JSON), the reason
--                                    being ARGV[2] when set, else "rate"
-- ARGV[1] = the update's inbox seq
-- KEYS[4] = <tag>:hold:due  hash   reason → the latest due (ms) of what is
--                                    held for it (quiet hours: the period's
--                                    end); a release before it takes nothing
-- ARGV[2] = "quiet" | "quiet_hours" | "paused" | "" (no hold decided by
--           the caller)
-- ARGV[3] = now (ms since the epoch)
-- ARGV[4] = rate per (ms), ARGV[5] = rate burst (≥ 1)
-- ARGV[6] = the held item's JSON (stored when held)
-- ARGV[7] = seconds the decisions hash and the due hash are kept after
--           their last write
-- ARGV[8] = the hold's due (ms) when the caller decided one with an end
--           it knows (quiet hours), else 0
--
-- Returns the outcome string: "push", "held:quiet", "held:paused",
-- "held:quiet_hours:<due ms>" (the period's end, ARGV[8]) or
-- "held:rate:<due ms>" (due = when the next token arrives: the digest's
-- slot).

local K_DEC, K_RATE, K_HELD, K_DUE = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local seq, reason, now = ARGV[1], ARGV[2], tonumber(ARGV[3])
local per, burst = tonumber(ARGV[4]), tonumber(ARGV[5])
local due = tonumber(ARGV[8] or '0') or 0

local prev = redis.call('HGET', K_DEC, seq)
if prev then return prev end

local out
if reason ~= '' then
  redis.call('RPUSH', K_HELD, ARGV[6])
  out = 'held:' .. reason
  if due > 0 then
    out = out .. ':' .. string.format('%d', due)
    local cur = tonumber(redis.call('HGET', K_DUE, reason) or '0')
    if due > cur then redis.call('HSET', K_DUE, reason, string.format('%d', due)) end
    redis.call('EXPIRE', K_DUE, tonumber(ARGV[7]))
  end
else
  local tok = tonumber(redis.call('HGET', K_RATE, 'tok') or burst)
  local t = tonumber(redis.call('HGET', K_RATE, 't') or now)
  if now > t then
    local add = math.floor((now - t) / per)
    tok = tok + add
    t = t + add * per
  end
  if tok >= burst then tok, t = burst, now end
  if tok >= 1 then
    tok = tok - 1
    out = 'push'
  else
    redis.call('RPUSH', K_HELD, ARGV[6])
    out = 'held:rate:' .. string.format('%d', t + per)
  end
  redis.call('HSET', K_RATE, 'tok', string.format('%d', tok), 't', string.format('%d', t))
  redis.call('PEXPIRE', K_RATE, per * (burst + 1))
end
redis.call('HSET', K_DEC, seq, out)
redis.call('EXPIRE', K_DEC, tonumber(ARGV[7]))
return out
