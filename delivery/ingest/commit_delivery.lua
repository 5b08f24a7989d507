-- commit_delivery.lua: the GitHub commit point.
-- Rule: docs/design.md §1 the commit point; §3 GitHub dedup; §14 shared
-- objects and the body marker. Preceded by marks.lua (wg_mk_find,
-- wg_mk_put).
--
-- KEYS[1] raw delivery "<in>:raw:<guid>:<hook>" (its existence is the
--         (hook, guid) dedup; records of the v1 format were written with a
--         marker "<in>:dd:<hook>:<guid>" beside them, which expires with them)
-- KEYS[2] the previous version's body marker "<in>:bs:<hash of (repo, the
--         body's stored form)[:16] hex>" (read only), while it may be
--         there; KEYS[1] again once the caller knows they are gone
-- KEYS[3] raw delivery (KEYS[1] again: the position the record is written to)
-- KEYS[4] ingest stream "<in>:ingest"
-- KEYS[5] the v1 body marker "<in>:bh:<sha256(repo, body) hex>" (read only),
--         KEYS[6] the v2 body marker "<in>:bm:<sha256(repo, body)[:16] hex>"
--         (read only): markers of before, while they may be there; KEYS[1]
--         again in both places once the caller knows they are gone
-- KEYS[7] the shard's marker epoch "<in>:bsepoch"
-- KEYS[8] the shard's body marks epoch "<in>:lbepoch"
-- KEYS[9..8+n] shared objects "<in>:obj:<hash>" the record references
-- ARGV[1] ttl seconds, ARGV[2] raw record, ARGV[3] "1" to pass dedup (replay),
-- ARGV[4] guid, ARGV[5] hook, ARGV[6] "1" to write an ingest record,
-- ARGV[7] ingest stream maxlen, ARGV[8] the normalized fact ("" for none),
-- ARGV[9] workspace (written beside a fact), ARGV[10] n, ARGV[11] now (unix ms),
-- ARGV[12] the objects' ttl seconds (the retention and a day),
-- ARGV[13] the shard's body marks "<in>:lb" (its keys are built from it:
-- the count "<in>:lb:<start>" and the buckets "<in>:lb:<start>:<b>"),
-- ARGV[14] the body marker's member: the first 63 bits of the body's hash
-- (KEYS[2]'s) as a decimal integer, ARGV[15] the member mod 2^28 (its
-- bucket's hash, marks.lua),
-- ARGV[16..15+n] each object's stored value (stored, or its TTL
-- refreshed if it is there), "+" where the caller believes it is stored
-- (its TTL is refreshed), or "" where the caller gave it its TTL lately
-- (it is only checked to be there)
-- Returns {0, ingest id or "", epoch, bkepoch} committed, {1, "", epoch,
-- bkepoch} duplicate guid, {2, "", epoch, bkepoch} duplicate body, {3, i,
-- epoch, bkepoch} object i was given as "" but is not stored (nothing
-- written but TTL refreshes and the epochs: call again with its value).
-- epoch is the marker epoch: when this shard's first stored-form marker
-- was written (unix ms), "0" if the shard's ingest stream had no record
-- then (no marker of before to honour); the caller stops reading the
-- markers of before a retention after it. bkepoch is the same for the
-- body marks (when the first was written): the caller stops reading the
-- "<in>:bs:" keys a retention after it.
--
-- The body marker (docs/design.md §14) is the body's hash as a member of
-- the shard's marker set ARGV[13] (marks.lua, a plain set: intsets grown
-- by linear hashing), in periods of half the ttl (Redis's clock); it
-- dedups for at least the ttl. The periods' counts are read with the
-- other keys (one MGET), then one SISMEMBER per period that has markers.

local ttl = tonumber(ARGV[1])
local now = tonumber(redis.call('TIME')[1])
local period = math.ceil(ttl / 2)
local base = ARGV[13]
local ck = wg_mk_state(base, now, period).k
local seen = redis.call('MGET', KEYS[7], KEYS[8], KEYS[1], KEYS[2], KEYS[5], KEYS[6], ck[1], ck[2], ck[3])
wg_mk_seed(base, now, period, { seen[7], seen[8], seen[9] })
local epoch, bkepoch = seen[1], seen[2]
if not epoch or not bkepoch then
  -- ingest records in the stream mean commits of before within the
  -- retention, whose markers may be there (an empty stream, or one a
  -- worker's consumer group made, has none: the trim drops records with
  -- their markers' age)
  local was = redis.call('XLEN', KEYS[4]) > 0 and ARGV[11] or '0'
  if not epoch then
    epoch = was
    redis.call('SET', KEYS[7], epoch)
  end
  if not bkepoch then
    bkepoch = was
    redis.call('SET', KEYS[8], bkepoch)
  end
end
local member, m = ARGV[14], tonumber(ARGV[15])
if ARGV[3] ~= '1' then
  if seen[3] then return {1, '', epoch, bkepoch} end
  if seen[4] or seen[5] or seen[6] then return {2, '', epoch, bkepoch} end
  if wg_mk_find(base, true, now, period, member, m) then return {2, '', epoch, bkepoch} end
end
-- The shared objects (docs/design.md §14): each one the record references
-- is stored, or no record is written. An object outlives every record that
-- references it: a commit that stores or refreshes it gives it the
-- retention and a day, never less than it had (GT: a shorter retention set
-- later does not cut it under records written before; a refresh that then
-- returns {3, i} is harmless), and a caller only skips the refresh for
-- half a day after it gave it that TTL. Data first, markers after: within
-- one script it is atomic either way, but this is the order that stays
-- safe if the script is ever split.
local nobj = tonumber(ARGV[10])
local o = 15 -- ARGV[o + i] is object i's value, KEYS[8 + i] its key
local objttl = tonumber(ARGV[12])
local function refresh(k)
  return redis.call('EXPIRE', k, objttl, 'GT') == 1 or redis.call('EXISTS', k) == 1
end
local check = {}
for i = 1, nobj do
  if ARGV[o + i] == '' then check[#check + 1] = KEYS[8 + i] end
end
if #check > 0 and redis.call('EXISTS', unpack(check)) < #check then
  for i = 1, nobj do
    if ARGV[o + i] == '' and redis.call('EXISTS', KEYS[8 + i]) == 0 then return {3, i, epoch, bkepoch} end
  end
end
for i = 1, nobj do
  if ARGV[o + i] == '+' and not refresh(KEYS[8 + i]) then return {3, i, epoch, bkepoch} end
end
for i = 1, nobj do
  local v = ARGV[o + i]
  if v ~= '' and v ~= '+' and not refresh(KEYS[8 + i]) then
    redis.call('SET', KEYS[8 + i], v, 'EX', objttl)
  end
end
redis.call('SET', KEYS[3], ARGV[2], 'EX', ttl, 'NX')
local id = ''
if ARGV[6] == '1' and ARGV[8] ~= '' then
  id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*', 'g', ARGV[4], 'h', ARGV[5], 'r', ARGV[3],
    'w', ARGV[9], 'f', ARGV[8])
elseif ARGV[6] == '1' then
  id = redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*', 'g', ARGV[4], 'h', ARGV[5], 'r', ARGV[3])
end
wg_mk_put(base, true, now, period, ttl, member, m)
return {0, id, epoch, bkepoch}
