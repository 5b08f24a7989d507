-- lease.lua: grants, keeps or moves a controller lease.
-- Rule: docs/design.md §6 controller leases with fencing epochs, edges bounded per party.
--
-- lease: take a session's controller lease.
-- KEYS[1] T:ctl:<session>, KEYS[2] T:held:<caller>,
-- KEYS[3] T:held:<ARGV[3]> (KEYS[2] again when ARGV[3] is ''),
-- KEYS[4] T:watch:<caller>
-- ARGV[1] caller party, ARGV[2] scope,
-- ARGV[3] the holder to replace ('' = replace nobody), ARGV[4] its epoch,
-- ARGV[5] the session id (the member of the T:held sets),
-- ARGV[6] how many edges the caller may hold (T:held + T:watch)
-- Returns {status, holder, epoch, previous holder}:
--   status 1 granted (free, or ARGV[3] still holds at ARGV[4]): epoch+1
--   status 2 the caller holds it already: scope updated, same epoch
--   status 0 held by someone else: nothing written
--   status -1 the caller holds ARGV[6] edges already: nothing written

local h = redis.call('HMGET', KEYS[1], 'holder', 'epoch')
local holder = h[1] or ''
local epoch = tonumber(h[2] or '0') or 0
if holder == ARGV[1] then
  redis.call('HSET', KEYS[1], 'scope', ARGV[2])
  redis.call('SADD', KEYS[2], ARGV[5])
  return {2, holder, epoch, ''}
end
if holder == '' or (ARGV[3] ~= '' and holder == ARGV[3] and epoch == tonumber(ARGV[4])) then
  if redis.call('SCARD', KEYS[2]) + redis.call('SCARD', KEYS[4]) >= tonumber(ARGV[6]) then
    return {-1, holder, epoch, ''}
  end
  epoch = epoch + 1
  redis.call('HSET', KEYS[1], 'holder', ARGV[1], 'scope', ARGV[2], 'epoch', epoch)
  if holder ~= '' then redis.call('SREM', KEYS[3], ARGV[5]) end
  redis.call('SADD', KEYS[2], ARGV[5])
  return {1, ARGV[1], epoch, holder}
end
return {0, holder, epoch, ''}
