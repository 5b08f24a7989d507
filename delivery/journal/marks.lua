-- marks.lua: sets of markers kept by period in small hashes or sets that
-- stay compact at any rate (docs/design.md §2 "The dedup window"; §14 the
-- body marker). Included first by every script that journals
-- (journal.AppendLua is this file and journal.lua) and by
-- delivery/ingest/commit_delivery.lua.
--
-- A marker set is named by a base key ("<j>:mk" of a journal shard,
-- "<in>:bk" of an ingest shard). A marker is named by the hex digest of
-- what it marks (only hex digits 1–20 are read); in a set of values (the
-- journal's) it holds a small value, in a plain set (the ingest's) none.
-- The markers written in the period starting at start (Unix seconds, a
-- multiple of the period, Redis's clock) are counted by the string
-- "<base>:<start>" and kept in the hashes (sets) "<base>:<start>:-"
-- (level 0) and "<base>:<start>:<the hex's first d digits>" (level d,
-- 16^d of them): the n-th marker of a period goes to level wg_mk_level(n),
-- so a level opens once the ones before hold `fill` markers a key on
-- average. Every key therefore stays a listpack (a hash: fill 64 under
-- Redis's hash-max-listpack-entries, 128 by default; about 17 B a marker
-- against 95 in a hash table) or an intset (a set: fill 400 under
-- set-max-intset-entries, 512; 8 B a marker), whatever the rate, while
-- the keys' own cost (about 150 B each) is spread over their markers. The
-- member is hex digits 8–20 as a decimal integer (52 bits; the level's
-- digits are not in it). Every key of a period expires at
-- start + period + ttl.
--
--   wg_mk_field(hex) → the member of the marker named hex.
--   wg_mk_find(base, isset, now, period, hex, field)
--     → the marker's value (true in a plain set) and the start of its
--       period, if it is in one of the 3 periods whose keys may still be
--       kept (now's and the two before), else nil: one MGET of the 3
--       counts, then one HGET (SISMEMBER) per level each period opened.
--   wg_mk_put(base, isset, now, period, ttl, hex, field, v)
--     writes the marker in now's period (value v in a hash).

local function wg_mk_fill(isset)
  if isset then return 400 end
  return 64
end
-- wg_mk_level is the level the n-th marker of a period goes to: level d
-- takes fill·16^d markers, after the fill·(16^d − 1)/15 of the levels
-- before. Levels stop at 7 (the member starts at digit 8).
local function wg_mk_level(n, isset)
  local width = wg_mk_fill(isset)
  local d, upto = 0, width
  while n > upto and d < 7 do
    width = width * 16
    upto = upto + width
    d = d + 1
  end
  return d
end
local function wg_mk_key(base, start, hex, d)
  if d == 0 then return base .. ':' .. start .. ':-' end
  return base .. ':' .. start .. ':' .. string.sub(hex, 1, d)
end
local function wg_mk_field(hex)
  return string.format('%d', tonumber(string.sub(hex, 8, 20), 16))
end
local function wg_mk_find(base, isset, now, period, hex, field)
  local cur = now - now % period
  local starts = {}
  for k = 0, 2 do starts[k + 1] = string.format('%d', cur - k * period) end
  local counts = redis.call('MGET', base .. ':' .. starts[1], base .. ':' .. starts[2], base .. ':' .. starts[3])
  for k = 1, 3 do
    if counts[k] then
      for d = 0, wg_mk_level(tonumber(counts[k]), isset) do
        local key = wg_mk_key(base, starts[k], hex, d)
        if isset then
          if redis.call('SISMEMBER', key, field) == 1 then return true, cur - (k - 1) * period end
        else
          local v = redis.call('HGET', key, field)
          if v then return v, cur - (k - 1) * period end
        end
      end
    end
  end
  return nil
end
local function wg_mk_put(base, isset, now, period, ttl, hex, field, v)
  local cur = now - now % period
  local start = string.format('%d', cur)
  local at = cur + period + ttl
  local count = base .. ':' .. start
  local n = redis.call('INCR', count)
  if n == 1 then redis.call('EXPIREAT', count, at) end
  local key = wg_mk_key(base, start, hex, wg_mk_level(n, isset))
  local size
  if isset then
    redis.call('SADD', key, field)
    size = redis.call('SCARD', key)
  else
    redis.call('HSET', key, field, v)
    size = redis.call('HLEN', key)
  end
  if size == 1 then redis.call('EXPIREAT', key, at, 'NX') end
end
