-- apply_one.lua: the entry of the apply script (after apply.lua): one fact.
--
-- ARGV[5] = input JSON, ARGV[6] = data (see apply.lua).
wg_config(ARGV[1], ARGV[2], ARGV[3])
return tr_apply(cjson.decode(ARGV[5]), ARGV[6])
