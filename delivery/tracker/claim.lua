-- claim.lua: link a PR to the session that opened it. The first claim
-- wins; the same session again is a no-op; another session is refused and
-- journaled once per (PR, claimant) as wakegate.link_conflict. A new link
-- to a PR the tracker has already seen journals github.pull_request.linked,
-- so the author's chain hears of the PR once. A link a Wakegate-Session
-- trailer made (session_via=trailer) is replaced by any session's claim.
-- Rule: docs/design.md §3 the link of a PR to its session.
--
-- KEYS[1]    = "<tag>:journal" of the repository's shard (routes the script)
-- ARGV[1..3] = journal.AppendArgs()
-- ARGV[4]    = tag
-- ARGV[5]    = input JSON (claimInput in claim.go): workspace, repo,
--              number, session, server_source, now_ms, now_time, retention
--
-- Returns {"ok", stream ids appended...} or {"conflict", holder, stream ids
-- appended...}; holder is "" when the holder is in another workspace.

local I = cjson.decode(ARGV[5])
wg_config(ARGV[1], ARGV[2], ARGV[3])
tr_init(ARGV[4], I)
local ws, repo, n, session = I.workspace, I.repo, I.number, I.session
local pk = k_pr(repo, n)
local h = pr_hash(pk)

-- A link by a Wakegate-Session trailer is no claim: the session's own
-- claim replaces it (the same session's claim makes it one).
local replaced
if h.session and h.session_via == 'trailer' and h.session_ws == ws then
  redis.call('HDEL', pk, 'session_via')
  if h.session ~= session then
    replaced = h.session
    h.session = nil
  end
end

if h.session and (h.session ~= session or h.session_ws ~= ws) then
  local holder = ''
  if h.session_ws == ws then holder = h.session end
  emit({
    id = 'link_conflict/' .. repo .. '#' .. int(n) .. '/' .. session,
    source = I.server_source, type = 'wakegate.link_conflict',
    subject = pr_subject(repo, n), time = NOW_TIME, workspace = ws,
    sessionid = session, priority = 'internal',
    summary = 'session ' .. session .. ' claimed PR #' .. int(n) .. ' (' .. repo .. '), already linked to ' ..
      (holder ~= '' and ('session ' .. holder) or 'another session'),
    data = cjson.encode({ repo = repo, number = n, claimant = session, holder = holder }),
  })
  return { 'conflict', holder, unpack(SIDS) }
end

if not h.session then
  redis.call('HSET', pk, 'session', session, 'session_ws', ws)
  h.session, h.session_ws = session, ws
  if not h.state then
    -- linked before GitHub told us of the PR: keep the link for a while,
    -- the PR's first snapshot makes the hash persistent
    redis.call('EXPIRE', pk, RETENTION)
  else
    local title = string.gsub(h.title or '', '[\r\n]+', ' ')
    synth(ws, repo, n, h, 'linked', 'linked/' .. session, 'attention',
      'PR #' .. int(n) .. ' linked to session ' .. session .. ': ' .. title .. ' (' .. repo .. ')',
      { session = session, state = h.state, replaced = replaced })
  end
end
table.insert(SIDS, 1, 'ok')
return SIDS
