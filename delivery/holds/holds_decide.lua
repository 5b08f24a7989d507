-- holds_decide.lua: defines holds_decide(KEYS, ARGV), the per-recipient
-- part of the holds decision (docs/design.md §7) with the KEYS, ARGV and
-- reply that decide.lua documents. Followed by decide.lua, or by
-- deliver_decide.lua.

local function holds_decide(KEYS, ARGV)
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
end
