-- inbox_deliver.lua: defines inbox_deliver(KEYS, ARGV), one update of one
-- recipient's inbox (docs/design.md §7) with the KEYS, ARGV and reply that
-- deliver.lua documents. Preceded by inbox.lua; followed by deliver.lua,
-- or by delivery/holds/deliver_decide.lua, which goes on in the same
-- atomic step.

local function inbox_deliver(KEYS, ARGV)
  local K_LAST, K_ENTRIES, K_UNACKED, K_WAKES, K_MARKER, K_ESC = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
  local d = cjson.decode(ARGV[1])
  local ev, settings = ARGV[2], ARGV[3]

  -- duplicate answers from the marker when this event already reached here.
  local function duplicate()
    if d.redelivery then return nil end
    local m = redis.call('GET', K_MARKER)
    if not m then return nil end
    local seq, new, wake, kind = string.match(m, '^(%d+) (%d) (%d) (%a+)$')
    if not seq then return redis.error_reply('malformed dedup marker ' .. K_MARKER) end
    return { tonumber(seq), 1, tonumber(new), tonumber(wake), kind, 0 }
  end

  -- wakes_alone: the update's own kind asks for a wake.
  local function wakes_alone() return d.kind == 'wake' or d.kind == 'alert' end

  -- wakes_again applies the rule for a fold: a wake kind, and the priority
  -- rose above the entry's, or the event is terminal, or its type's attended
  -- kind is alert, or its type differs from the one that last woke the entry
  -- (an operator's redelivery and an escalated copy always may).
  local function wakes_again(meta)
    if not wakes_alone() then return false end
    return d.redelivery or d.x ~= nil or d.rank > meta.p or d.terminal or d.alert or d.type ~= meta.wy
  end

  -- new_entry is the meta of an entry holding only this update.
  local function new_entry()
    return { hp = d.rank, p = d.rank, n = 1, f = d.now, i = {} }
  end

  -- fold_headline makes the update the headline when it is at least as
  -- urgent as the current one (the newest among equals); otherwise the
  -- headline stays and the update becomes latest.
  local function fold_headline(meta, headline)
    if d.rank >= meta.hp then
      meta.hp = d.rank
      return ev, ''
    end
    return headline, ev
  end

  local dup = duplicate()
  if dup then return dup end

  local cur = redis.call('HGET', K_ENTRIES, d.ck)
  local meta, headline, latest, wake
  local arm = false
  if cur then
    local m, h, _, s = split_entry(cur)
    meta, settings = cjson.decode(m), s
    wake = wakes_again(meta)
    arm = d.rank > meta.p or d.x ~= nil or not meta.xa
    headline, latest = fold_headline(meta, h)
    meta.n = meta.n + 1
    if d.rank > meta.p then meta.p = d.rank end
  else
    meta, headline, latest = new_entry(), ev, ''
    wake = wakes_alone()
    arm = true
  end
  arm = arm and d.esc > 0

  local seq = redis.call('INCR', K_LAST)
  local kind = d.kind
  if wakes_alone() and not wake then kind = 'notice' end -- attention+ that does not wake again rides the next read

  local ids = meta.i
  ids[#ids + 1] = d.id
  while #ids > 64 do table.remove(ids, 1) end
  meta.k, meta.l, meta.v = kind, d.now, d.via
  if d.redelivery then meta.r = true end
  if d.waiter then meta.wa = true end
  if d.x ~= nil then meta.x = d.x end
  if arm then
    meta.xa = true
    redis.call('ZADD', K_ESC, d.esc, d.ck)
  end
  if wake then
    meta.w, meta.ws, meta.wy = true, int(seq), d.type
    redis.call('ZADD', K_WAKES, seq, d.ck)
  else
    meta.w = nil
  end

  redis.call('HSET', K_ENTRIES, d.ck, join_entry(meta, headline, latest, settings))
  redis.call('ZADD', K_UNACKED, seq, d.ck)

  local new, woke = cur and 0 or 1, wake and 1 or 0
  redis.call('SET', K_MARKER, int(seq) .. ' ' .. new .. ' ' .. woke .. ' ' .. kind, 'EX', d.ttl)
  redis.call('PUBLISH', d.channel, wake and 'wake' or 'update')
  return { seq, 0, new, woke, kind, arm and 1 or 0 }
end
