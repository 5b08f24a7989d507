-- commit_events.lua: the agent commit point (docs/design.md §4): journals
-- agent events and applies them to their sessions' records, every item or
-- none. Preceded by journal.lua (wg_append, wg_seen, wg_terminal) and
-- registry.lua (wg_session).
--
-- KEYS: "<tag>:journal" of every shard the items go to, then the registry
-- key of every item, in item order (all under one shard's tag).
-- ARGV[1..3] journal.AppendArgs; ARGV[4] now (ms); ARGV[5] workspace;
-- ARGV[6] item count n; then 15 values per item: tag, event JSON, source,
-- id, type, parent, lineage JSON, labels JSON, paused_until ms, reason,
-- seen ("1" when the pusher is the item's session), journal ("0" for a
-- heartbeat: registry only), and for a terminal event its subject, time
-- and summary (else three "").
-- Returns per item {stream id or "", 1 appended | 0 duplicate}.

wg_config(ARGV[1], ARGV[2], ARGV[3])
local now, ws, n = ARGV[4], ARGV[5], tonumber(ARGV[6])
local out = {}
for i = 1, n do
  local b = 6 + (i - 1) * 15
  local tag, ev, source, id, typ = ARGV[b+1], ARGV[b+2], ARGV[b+3], ARGV[b+4], ARGV[b+5]
  local seen, journal = ARGV[b+11], ARGV[b+12]
  local regkey = KEYS[#KEYS - n + i]
  if journal == '0' then
    wg_session(regkey, typ, now, '', '', '', '', '', seen)
    out[i] = {'', 1}
  else
    local lineage
    if wg_seen(tag, source, id) then
      lineage = ''  -- a duplicate: applied already, wg_append returns the first entry
      if seen == '1' then redis.call('HSET', regkey, 'seen_at', now) end
    else
      lineage = wg_session(regkey, typ, now, ARGV[b+6], ARGV[b+7], ARGV[b+8], ARGV[b+9], ARGV[b+10], seen)
    end
    if lineage ~= '' and lineage ~= '[]' then
      -- The registry keeps a JSON array of ids; the event carries one
      -- string, nearest first, single spaces (docs/design.md §2):
      -- '["a","b"]' becomes '"a b"' (ids hold no quotes or spaces).
      local ids = (string.gsub(string.sub(lineage, 2, -2), '","', ' '))
      ev = string.sub(ev, 1, -2) .. ',"lineage":' .. ids .. '}'
    end
    local sid, added = wg_append(tag, ev, ws, source, id)
    if added == 1 and ARGV[b+13] ~= '' then
      wg_terminal(tag, ws, ARGV[b+13], typ, ARGV[b+14], ARGV[b+15], sid)
    end
    out[i] = {sid, added}
  end
end
return out
