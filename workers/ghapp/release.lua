-- release.lua: deletes a lease only while it still holds the caller's
-- token, so a lease that expired and was taken over is left alone.
-- Rule: docs/design.md §3 the GitHub App's sweep runs one at a time.
--
-- KEYS[1] = the lease; ARGV[1] = the token. Returns 1 if deleted.

if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
