-- inbox.lua: functions shared by deliver.lua, list.lua and ack.lua, which
-- it precedes. One recipient's keys (keys.go builds the names; every one
-- starts with "<prefix>:{<prefix>:ib:<ws>:<party>}", so a script runs in
-- one cluster slot):
--
--   :n         string  the last seq assigned (INCR; seqs start at 1)
--   :e         hash    coalesce key → entry (format below)
--   :u         zset    coalesce key scored by its entry's current seq;
--                      exactly the unacked entries
--   :w         zset    coalesce key scored by the seq of the entry's
--                      latest update that decided a wake (only entries
--                      that have woken); "is there a wake after s" is
--                      ZRANGEBYSCORE :w (s +inf LIMIT 0 1
--   :d:<sha1>  string  dedup marker of event (source, id), sha1 of
--                      source .. "\0" .. id (of an escalated copy: of
--                      source .. "\0" .. id .. "\0escalated"); value
--                      "<seq> <new> <wake> <kind>" (the original Result);
--                      expires after the retention
--   :x         zset    escalation due index (docs/design.md §8): coalesce key
--                      scored by the ms its escalation check is due;
--                      written by deliver.lua (arming), cleared by ack.lua,
--                      drained by package escalate
--
-- An entry is four parts joined by "\n" (none of them contains one: the
-- event and settings are compact JSON, and cjson escapes newlines):
--
--   <meta JSON> \n <headline event JSON> \n <latest event JSON, or "" when
--   the headline is the latest> \n <settings JSON, or "">
--
-- Meta fields (short names: they are stored once per entry; the headline's
-- type, subject and summary are read from the headline event itself):
--   hp       headline priority rank (0 info, 1 attention, 2 critical)
--   p        entry priority rank: the highest folded in
--   n        count of events folded in
--   k        kind the latest update decided: wake|alert|notice|digest
--   w        true when the entry's current seq decided a wake (else absent)
--   ws, wy   seq ("%d") and type of the latest update that decided a wake
--   f, l     first_at, last_at (ms since the epoch)
--   i        the last 64 event ids folded in, oldest first
--   v        via of the latest update
--   r, wa    redelivered, waiter: true or absent
--   xa       true once an update armed the entry's escalation (else absent)
--   x        escalated copy: {l = level, p = parties passed (original
--            recipient first), r = rung, why = reason}, or absent

-- int renders a number the way Go's %d does (tostring would say 1e+15).
local function int(n) return string.format('%d', n) end

-- split_entry returns the four parts of an entry.
local function split_entry(v)
  local a = string.find(v, '\n', 1, true)
  local b = string.find(v, '\n', a + 1, true)
  local c = string.find(v, '\n', b + 1, true)
  return string.sub(v, 1, a - 1), string.sub(v, a + 1, b - 1),
    string.sub(v, b + 1, c - 1), string.sub(v, c + 1)
end

-- join_entry is the inverse of split_entry.
local function join_entry(meta, headline, latest, settings)
  return cjson.encode(meta) .. '\n' .. headline .. '\n' .. latest .. '\n' .. settings
end

-- after_bound is the exclusive lower score bound "(s" of seqs after s.
local function after_bound(s) return '(' .. int(s) end
