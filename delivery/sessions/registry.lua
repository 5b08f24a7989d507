-- registry.lua: defines wg_session, the session registry's rule for one
-- agent event (docs/design.md §4 sessions, §2 lineage), included by the
-- agent commit script (delivery/ingest/commit_events.lua). It applies
-- one session event to the record at key (a KEYS entry of the caller)
-- and returns the lineage JSON to stamp on the event ("" if none).
--
--   wg_session(key, type, now_ms, parent, lineage_json, labels_json, paused_until_ms, reason, seen)

local function wg_session(key, typ, now, parent, lineage, labels, paused, reason, seen)
  if seen == '1' then redis.call('HSET', key, 'seen_at', now) end
  if typ == 'session.heartbeat' then
    redis.call('HSET', key, 'busy_at', now)
    return redis.call('HGET', key, 'lineage') or ''
  end
  if parent ~= '' and redis.call('HSETNX', key, 'parent', parent) == 1 then
    redis.call('HSET', key, 'lineage', lineage)
  end
  if labels ~= '' then redis.call('HSET', key, 'labels', labels) end
  if string.sub(typ, 1, 8) ~= 'session.' then return redis.call('HGET', key, 'lineage') or '' end
  redis.call('HSET', key, 'state', typ)
  if typ == 'session.turn_started' then
    redis.call('HSET', key, 'busy', 'busy', 'busy_at', now)
    redis.call('HDEL', key, 'paused_until', 'pause_reason') -- working again: the pause is over
  elseif typ == 'session.turn_ended' or typ == 'session.awaiting_input' or typ == 'session.permission_requested' then
    redis.call('HSET', key, 'busy', 'idle', 'busy_at', now)
  elseif typ == 'session.exited' then
    redis.call('HSET', key, 'exited', '1', 'busy', 'unknown')
  elseif typ == 'session.crashed' then
    redis.call('HSET', key, 'busy', 'unknown')
  elseif typ == 'session.spawned' then
    redis.call('HSET', key, 'exited', '0')
  elseif typ == 'session.resumed' then
    redis.call('HSET', key, 'exited', '0', 'seen_at', now)
    redis.call('HDEL', key, 'paused_until', 'pause_reason')
  elseif typ == 'session.paused' then
    redis.call('HSET', key, 'paused_until', paused, 'pause_reason', reason)
  end
  return redis.call('HGET', key, 'lineage') or ''
end
