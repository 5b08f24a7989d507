-- match.lua: reads the candidates of one or several events.
-- Rule: docs/design.md §6 subscriptions, read by routing (§5).
--
-- match: the subscriptions in the union of each event's index sets, for
-- one or several events of one workspace at once.
-- KEYS[1] T:subs, KEYS[2..] the index sets of every event, event after
-- event
-- ARGV[i] how many of those sets are event i's
-- Returns one array per event (in ARGV's order): the JSON of every
-- subscription in the union of its sets (ids whose record is missing are
-- skipped).

local out, k = {}, 2
-- A workspace without any subscription record matches nothing whatever
-- its index sets hold: one lookup instead of a union per event (a batch
-- of GitHub events in a workspace nobody subscribes in; docs/performance.md).
if redis.call('EXISTS', KEYS[1]) == 0 then
  for i = 1, #ARGV do out[i] = {} end
  return out
end
for i = 1, #ARGV do
  local n = tonumber(ARGV[i])
  local ids = redis.call('SUNION', unpack(KEYS, k, k + n - 1))
  k = k + n
  local subs = {}
  for j = 1, #ids, 500 do
    local chunk = {}
    for m = j, math.min(j + 499, #ids) do chunk[#chunk + 1] = ids[m] end
    local vals = redis.call('HMGET', KEYS[1], unpack(chunk))
    for m = 1, #chunk do
      if vals[m] then subs[#subs + 1] = vals[m] end
    end
  end
  out[i] = subs
end
return out
