-- marks.lua: sets of markers kept by period in small hashes or sets,
-- grown by linear hashing so that each stays a listpack or an intset at
-- any rate (docs/design.md §2 "The dedup window"; §14 the body marker).
-- Included first by every script that journals (journal.AppendLua is this
-- file and journal.lua) and by delivery/ingest/commit_delivery.lua.
--
-- A marker set is named by a base key ("<j>:lh" of a journal shard,
-- "<in>:lb" of an ingest shard). A marker is named by its member, a
-- non-negative integer of up to 63 bits in decimal digits (the journal's:
-- hex digits 8–20 of the sha1 of what it marks, wg_mk_member; the
-- ingest's: the body hash's first 63 bits, computed by the caller); m is
-- the member mod 2^28, computed exactly from its digits (wg_mk_h: a Lua
-- number holds 53 bits). In a set of values (the journal's) a marker
-- holds a value, in a plain set (the ingest's) none. The markers written in the period
-- starting at start (Unix seconds, a multiple of the period, Redis's
-- clock) are counted by the string "<base>:<start>" (n) and kept in
-- B = 1 + floor(n / fill) buckets, the hashes (sets) "<base>:<start>:<b>"
-- for b in 0 … B−1. With L = floor(log2 B) and s = B − 2^L, m's bucket is
-- m mod 2^(L+1) if m mod 2^L < s, else m mod 2^L (wg_mk_bucket;
-- journal.LinearBucket is the same in Go): a lookup reads exactly one
-- bucket per period. When an insert makes B grow by one, bucket s is
-- split: its members whose m mod 2^(L+1) is s + 2^L move to the new
-- bucket B − 1 (one HGETALL / SMEMBERS of a small key, every fill
-- inserts). A bucket holds fill markers on average, twice that before it
-- splits: fill 32 for hashes (hash-max-listpack-entries, 128 by default)
-- and 128 for sets (set-max-intset-entries, 512), so every key stays a
-- listpack (about 20 B a marker against 95 in a hash table) or an intset
-- (8 B), while a key's own cost (about 100 B) is spread over its markers.
-- Every bucket holds the sentinel member -1 from its creation (value 0),
-- so it exists until the period's keys expire together, at
-- start + period + ttl, and only its creation sets that expiry.
--
--   wg_mk_member(hex) → the journal's member of the marker named hex (a
--     decimal string).
--   wg_mk_seed(base, cur, period, counts) records the counts of the periods
--     starting at cur, cur − period and cur − 2·period that the caller
--     read itself (one MGET with its other reads): wg_mk_find reads them
--     only when not seeded.
--   wg_mk_find(base, isset, now, period, member)
--     → the marker's value (true in a plain set) and the start of its
--       period, if it is in one of the 3 periods whose keys may still be
--       kept (now's and the two before), else nil: one MGET of the 3
--       counts (once per call and base), then one HGET (SISMEMBER) per
--       period that has markers.
--   wg_mk_put(base, isset, now, period, ttl, member, v)
--     writes the marker in now's period (value v in a hash).

local WG_MK_FILL_HASH, WG_MK_FILL_SET = 32, 128
local function wg_mk_fill(isset)
  if isset then return WG_MK_FILL_SET end
  return WG_MK_FILL_HASH
end
local WG_LN2 = math.log(2)
-- wg_mk_pow is 2^floor(log2 B) for B ≥ 1.
local function wg_mk_pow(B)
  local p = 2 ^ math.floor(math.log(B) / WG_LN2)
  if p > B then p = p / 2 elseif p * 2 <= B then p = p * 2 end
  return p
end
-- wg_mk_bucket is m's bucket among B (linear hashing).
local function wg_mk_bucket(m, B)
  local p = wg_mk_pow(B)
  local b = m % p
  if b < B - p then b = m % (2 * p) end
  return b
end
local function wg_mk_member(hex)
  local m = tonumber(string.sub(hex, 8, 20), 16)
  return string.format('%d', m), m
end
-- wg_mk_h is member x mod 2^28 (x = hi·10^15 + lo; hi·10^15 mod 2^28 is
-- (hi·5^15 mod 2^13)·2^15, every step exact in a double).
local function wg_mk_h(x)
  if #x <= 15 then return tonumber(x) % 268435456 end
  local hi, lo = tonumber(string.sub(x, 1, -16)), tonumber(string.sub(x, -15))
  return ((hi * 30517578125) % 8192 * 32768 + lo) % 268435456
end
-- wg_mk_st: base → what this call knows of its 3 periods: cur (the
-- current period's start), k (the count keys, newest first; a bucket's
-- key is its count key, ':' and the bucket) and n (the counts, false for
-- none; nil until read). Numbers are written into key names by Lua's
-- own conversion ("%.14g": exact for these integers).
local wg_mk_st = {}
local function wg_mk_state(base, now, period)
  local st = wg_mk_st[base]
  if not st then
    local cur = now - now % period
    local p = base .. ':'
    st = { cur = cur, k = { p .. cur, p .. (cur - period), p .. (cur - 2 * period) } }
    wg_mk_st[base] = st
  end
  return st
end
local function wg_mk_seed(base, now, period, counts)
  wg_mk_state(base, now, period).n = { tonumber(counts[1]) or false, tonumber(counts[2]) or false, tonumber(counts[3]) or false }
end
local function wg_mk_find(base, isset, now, period, member, m)
  local st = wg_mk_state(base, now, period)
  if not st.n then wg_mk_seed(base, now, period, redis.call('MGET', st.k[1], st.k[2], st.k[3])) end
  m = m or wg_mk_h(member)
  local fill = wg_mk_fill(isset)
  for k = 1, 3 do
    local n = st.n[k]
    if n then
      local key = st.k[k] .. ':' .. wg_mk_bucket(m, 1 + math.floor(n / fill))
      if isset then
        if redis.call('SISMEMBER', key, member) == 1 then return true, st.cur - (k - 1) * period end
      else
        local v = redis.call('HGET', key, member)
        if v then return v, st.cur - (k - 1) * period end
      end
    end
  end
  return nil
end
-- wg_mk_split moves the members of bucket s (of B, before the insert that
-- makes B + 1) whose m mod 2^(L+1) is s + 2^L to the new bucket B, which
-- it creates with the sentinel and the period's expiry at; ck is the
-- period's count key.
local function wg_mk_split(ck, isset, B, at)
  local p = wg_mk_pow(B)
  local s = B - p
  local from, to = ck .. ':' .. s, ck .. ':' .. B
  local two = 2 * p
  if isset then
    local all = redis.call('SMEMBERS', from)
    local mv = { '-1' }
    for i = 1, #all do
      local x = all[i]
      if x ~= '-1' and wg_mk_h(x) % two >= p then mv[#mv + 1] = x end
    end
    redis.call('SADD', to, unpack(mv))
    redis.call('EXPIREAT', to, at)
    if #mv > 1 then
      mv[1] = mv[#mv]; mv[#mv] = nil
      redis.call('SREM', from, unpack(mv))
    end
  else
    local all = redis.call('HGETALL', from)
    local kv, del = { '-1', '0' }, {}
    for i = 1, #all, 2 do
      local x = all[i]
      if x ~= '-1' and wg_mk_h(x) % two >= p then
        kv[#kv + 1] = x; kv[#kv + 1] = all[i + 1]
        del[#del + 1] = x
      end
    end
    redis.call('HSET', to, unpack(kv))
    redis.call('EXPIREAT', to, at)
    if #del > 0 then redis.call('HDEL', from, unpack(del)) end
  end
end
local function wg_mk_put(base, isset, now, period, ttl, member, m, v)
  local st = wg_mk_state(base, now, period)
  local ck = st.k[1]
  local at = st.cur + period + ttl
  local n = redis.call('INCR', ck)
  if st.n then st.n[1] = n end
  local fill = wg_mk_fill(isset)
  local B = 1 + math.floor(n / fill)
  local key
  if n == 1 then
    redis.call('EXPIREAT', ck, at)
    key = ck .. ':0'
    if isset then redis.call('SADD', key, -1, member) else redis.call('HSET', key, -1, 0, member, v) end
    redis.call('EXPIREAT', key, at)
    return
  end
  if n % fill == 0 then wg_mk_split(ck, isset, B - 1, at) end
  key = ck .. ':' .. wg_mk_bucket(m or wg_mk_h(member), B)
  if isset then redis.call('SADD', key, member) else redis.call('HSET', key, member, v) end
end
