-- deliver_decide.lua: delivers into one recipient's inbox and, when the
-- update decides a wake, takes the holds decision (docs/design.md §7,
-- order quiet → PAUSED → attended → rate cap → channel) in the same call:
-- one round trip where deliver.lua then decide.lua take two.
--
-- KEYS[1..6] and ARGV[1..3] are delivery/inbox/deliver.lua's
-- (inbox.DeliveryCall); KEYS[7..10] are decide.lua's KEYS[1..4];
-- ARGV[4..10] are decide.lua's ARGV[2..8], except that ARGV[8]
-- (decide.lua's ARGV[6], the held item) is the item's JSON after its seq
-- and kind, without the opening brace (itemTail): the delivery decides
-- those two. All ten keys are the recipient's, under its inbox tag.
--
-- Returns deliver.lua's reply, with decide.lua's outcome appended as a
-- seventh value when the update decided a wake.
--
-- Preceded by delivery/inbox/inbox.lua, inbox_deliver.lua (both as
-- inbox.DeliverFuncLua) and holds_decide.lua.

local r = inbox_deliver(KEYS, ARGV)
if r[4] == 1 then
  local seq = string.format('%d', r[1])
  local item = '{"seq":' .. seq .. ',"kind":"' .. r[5] .. '",' .. ARGV[8]
  r[7] = holds_decide({ KEYS[7], KEYS[8], KEYS[9], KEYS[10] },
    { seq, ARGV[4], ARGV[5], ARGV[6], ARGV[7], item, ARGV[9], ARGV[10] })
end
return r
