-- advance.lua: moves a shard's cursor, fenced by the lease (a worker that
-- lost its lease, paused past the TTL, cannot move the new holder's
-- cursor), after appending the batch's delivery ledger entries. The next
-- batch is read by an XRANGE pipelined after it, not here: Redis would
-- convert every entry into Lua values and back.
-- Rule: docs/design.md §5 routing; §14 the fenced cursor; the delivery ledger.
--
-- KEYS[1] lease, KEYS[2] cursor, KEYS[3] ledger; ARGV[1] "owner:epoch",
-- ARGV[2] stream id, ARGV[3] the ledger's MAXLEN (~), ARGV[4..] the
-- ledger entries, 12 field values each.
-- Returns 1 when advanced, 0 (nothing written) when the lease is no longer
-- this holder's.

if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
for i = 4, #ARGV, 12 do
  redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[3], '*', unpack(ARGV, i, i + 11))
end
redis.call('SET', KEYS[2], ARGV[2])
return 1
