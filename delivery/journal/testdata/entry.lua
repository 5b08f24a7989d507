-- entry.lua (a test's, not wakegate's): renders an event table both ways
-- journal.lua can, for TestCompactEntry to decode and compare them.
--
-- KEYS[1] = a journal stream (routes the script; untouched)
-- ARGV[1] = the event table as JSON (data as a string of raw JSON)
-- Returns {wg_entry(e), wg_json(e)}.

local e = cjson.decode(ARGV[1])
return { wg_entry(e), wg_json(e) }
