-- ready_entry.lua (a test's, not wakegate's): journals the ready of one
-- PR twice, by ready_entry and by synth (the general path), for
-- TestReadyEntry to hold the two stored entries byte for byte equal.
--
-- KEYS[1] = "<tag>:journal"; ARGV[1..3] = journal.AppendArgs(), ARGV[4]
-- tag, ARGV[5] workspace, ARGV[6] repo, ARGV[7] PR number, ARGV[8] head,
-- ARGV[9] title, ARGV[10] session ("" for none), ARGV[11] now (RFC 3339).
-- Returns {ready_entry's entry ("" when it declined), synth's entry}.

wg_config(ARGV[1], ARGV[2], ARGV[3])
tr_init(ARGV[4], { now_ms = 1, now_time = ARGV[11], settle_ms = 0, retention = 86400 })
local ws, repo, n, head = ARGV[5], ARGV[6], tonumber(ARGV[7]), ARGV[8]
local h = { head = head, title = ARGV[9], state = 'open' }
if ARGV[10] ~= '' then h.session, h.session_ws = ARGV[10], ws end
local function entry(sid)
  if not sid then return '' end
  local m = redis.call('XRANGE', KEYS[1], sid, sid)[1][2]
  for i = 1, #m, 2 do if m[i] == 'e' then return m[i + 1] end end
end
local fast = entry(ready_entry(ws, repo, n, h, head, true))
local slow = entry(synth(ws, repo, n, h, 'ready', 'ready/' .. head, 'attention',
  'PR #' .. int(n) .. ' ready: ' .. summary_title(h) .. ' (' .. repo .. ')', nil, true))
return { fast, slow }
