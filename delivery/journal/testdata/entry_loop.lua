-- entry_loop.lua (a test's, not wakegate's): renders two event tables n
-- times, for BenchmarkEntryLua to time journal.lua's two forms.
--
-- KEYS[1] = a journal stream (routes the script; untouched)
-- ARGV[1], ARGV[2] = the event tables as JSON (data as a string of raw
-- JSON); ARGV[3] = n; ARGV[4] = "entry" (wg_entry) or "json" (wg_json,
-- the form the PR tracker wrote before).
-- Returns the bytes rendered.

local e1, e2 = cjson.decode(ARGV[1]), cjson.decode(ARGV[2])
local render = wg_entry
if ARGV[4] == 'json' then render = wg_json end
local bytes = 0
for _ = 1, tonumber(ARGV[3]) do bytes = bytes + #render(e1) + #render(e2) end
return bytes
