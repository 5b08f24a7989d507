-- claim_identity.lua: takes a worker identity when it is free.
-- Rule: docs/design.md §9 a worker's stable identity, held by one live process at a time.
--
-- KEYS[1] the identity record; ARGV[1] the claimant's value ("host pid
-- nonce"), ARGV[2] the record's ttl ms, ARGV[3] ms after which a holder
-- that has not refreshed the record is gone, ARGV[4] a holder's value the
-- claimant found dead ("" for none).
-- Returns "OK" when the identity is the claimant's (record written), else
-- the holder's value.

local cur = redis.call('GET', KEYS[1])
local take = (not cur) or cur == ARGV[1] or (ARGV[4] ~= '' and cur == ARGV[4])
if not take then
  local pttl = redis.call('PTTL', KEYS[1])
  take = pttl >= 0 and tonumber(ARGV[2]) - pttl > tonumber(ARGV[3])
end
if not take then return cur end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 'OK'
