-- state.lua: reads a PR's tracker, its reviews and the results at its
-- head in one round trip (the checks key needs the head the first read
-- finds). The keys share the repository's hash tag.
-- Rule: docs/design.md §3 the PR tracker.
--
-- KEYS[1] the PR's tracker hash, KEYS[2] its reviews hash
-- ARGV[1] the checks key without the sha: "<tag>:checks:<repo>@"
-- Returns {tracker HGETALL, reviews HGETALL, checks-at-head HGETALL}.

local h = redis.call('HGETALL', KEYS[1])
-- the head is field h, or head in a hash of the previous layout
local head, old
for i = 1, #h, 2 do
  if h[i] == 'h' then head = h[i + 1] elseif h[i] == 'head' then old = h[i + 1] end
end
head = head or old
local checks = {}
if head and head ~= '' then checks = redis.call('HGETALL', ARGV[1] .. head) end
return { h, redis.call('HGETALL', KEYS[2]), checks }
