-- apply.lua: fold one normalized GitHub delivery into the tracker of its
-- repository and journal, in the same step, the delivery's own event(s)
-- and the transitions (ready, checks_failed) it causes.
--
-- KEYS[1]    = "<tag>:journal" of the repository's shard (routes the script)
-- ARGV[1..3] = journal.AppendArgs()
-- ARGV[4]    = tag
-- ARGV[5]    = input JSON (applyInput in apply.go): workspace, repo, guid,
--              source, the own event's envelope (type, subject, id, time,
--              priority, coalescekey, terminal, summary), number (the PR the
--              subject names, 0 if none), sha_subject, deploy_sha (a
--              deployment status: its sha), and at most one of
--              pr / check / review; plus now_ms, now_time, settle_ms,
--              retention (s) and req (base → required check names)
-- ARGV[6]    = the own event's data, raw JSON ("" for none); or, when the
--              input has ev_at, the own event itself as the tracker
--              journals it (the JSON form of journal.decode, built by the caller),
--              without sessionid, which goes after its first ev_at bytes
--
-- Returns {"ok", stream ids appended...}, or {"need", base...} without
-- having written anything when the required checks of a base the fact
-- touches were not passed in req (the caller adds them and runs again).
--
-- This file defines tr_apply(I, DATA), which folds one fact in and returns
-- that reply; the entry that follows it (apply_one.lua, apply_batch.lua)
-- calls it once, or once per fact of a batch.

local I, DATA, ws, repo -- the fact being applied (set by tr_apply)

-- HEAD_MARKS are the head's ready and checks_failed ids: their short
-- field, their name in h and the field the former head keeps them in.
local HEAD_MARKS = { { 'r', 'ready_at_head', 'ready:' }, { 'f', 'failed_at_head', 'failed:' } }

-- apply_pr folds a pull_request snapshot in. Every payload carries the whole
-- PR, so the newest by updated_at wins: an older snapshot delivered late
-- (a draft toggle, a push) changes nothing but the sha index.
--
-- cur is the stored base, state, updated_at, head, session, session_ws
-- and h the PR's whole tracker hash (both read once by tr_apply); h gets
-- what this writes, so the evaluation after it need not read it again.
local function apply_pr(p, cur, h)
  local n = p.number
  local pk = k_pr(repo, n)
  if p.head ~= '' then index(repo, p.head, n) end
  local stored = tonumber(cur[3]) or 0
  if cur[2] and p.updated_ms > 0 and p.updated_ms < stored then return end
  local draft, merged = '0', '0'
  if p.draft then draft = '1' end
  if p.merged then merged = '1' end
  -- short names (tracker.lua's PR_LONG); repo and number are the key's
  local fields = { 'w', ws,
    's', p.state, 'd', draft, 'm', merged, 'b', p.base,
    'a', p.author, 't', p.title, 'l', p.labels,
    'u', int(math.max(p.updated_ms, stored)) }
  if p.head ~= '' and p.head ~= cur[4] then
    -- a new head starts over: its own results, its own settle clock
    fields[#fields + 1] = 'h'
    fields[#fields + 1] = p.head
    fields[#fields + 1] = 'hs'
    fields[#fields + 1] = int(NOW_MS)
    -- r and f are the head's: the former head keeps them as ready:<sha>
    -- and failed:<sha>, so that it is still once per head sha if it
    -- comes back (docs/design.md §3)
    local gone = {}
    for _, m in ipairs(HEAD_MARKS) do -- {short field, h's name, the sha field's prefix}
      local v = h[m[2]]
      if v then
        if cur[4] and cur[4] ~= '' then
          fields[#fields + 1] = m[3] .. cur[4]
          fields[#fields + 1] = v
          h[m[3] .. cur[4]] = v
        end
        gone[#gone + 1], h[m[2]] = m[1], nil
      end
    end
    if #gone > 0 then redis.call('HDEL', pk, unpack(gone)) end
  elseif h.legacy and h.head then
    -- the previous layout rewritten: the head and its clock move too
    fields[#fields + 1] = 'h'
    fields[#fields + 1] = h.head
    if h.head_seen_at then
      fields[#fields + 1] = 'hs'
      fields[#fields + 1] = h.head_seen_at
    end
  end
  if h.legacy then
    -- a hash of the previous layout (long names) is rewritten in the
    -- short one: its long fields go (ready:<sha> and failed:<sha> stay)
    redis.call('HDEL', pk, unpack(LEGACY))
    h.legacy = nil
  end
  redis.call('HSET', pk, unpack(fields))
  for i = 1, #fields, 2 do h[PR_LONG[fields[i]] or fields[i]] = fields[i + 1] end
  if p.state == 'open' then
    -- Only a closed PR's keys, and a link claimed before the PR's first
    -- snapshot (claim.lua), carry a TTL: a PR stored open has none.
    if cur[2] == 'closed' or (not cur[2] and cur[5]) then redis.call('PERSIST', pk) end
    if cur[2] == 'closed' then redis.call('PERSIST', k_reviews(repo, n)) end
  else
    redis.call('EXPIRE', pk, RETENTION)
    redis.call('EXPIRE', k_reviews(repo, n), RETENTION)
  end
end

-- apply_review keeps, per reviewer, the latest standing review by its own
-- time: commented overrides nothing; dismissed clears (and, on a tie, wins
-- over the review it dismissed, so a late redelivery cannot revive it).
local function apply_review(r)
  if r.state ~= 'approved' and r.state ~= 'changes_requested' and r.state ~= 'dismissed' then return end
  local rk = k_reviews(repo, r.number)
  local cur = redis.call('HGET', rk, r.reviewer)
  if cur then
    local state, at = pair(cur)
    if at > r.at_ms then return end
    if at == r.at_ms and state == 'dismissed' and r.state ~= 'dismissed' then return end
  end
  redis.call('HSET', rk, r.reviewer, r.state .. ' ' .. int(r.at_ms))
end

-- apply_check keeps the latest result per name at its sha, by the
-- payload's time; on a tie a completed result beats a pending one.
local function apply_check(c)
  local name = c.name
  if c.suite and string.sub(name, 1, 6) ~= 'suite:' then name = 'suite:' .. name end
  for _, n in ipairs(c.prs) do index(repo, c.sha, n) end
  local ck = k_checks(repo, c.sha)
  local cur = redis.call('HGET', ck, name)
  if cur then
    local result, at = pair(cur)
    if at > c.at_ms then return end
    if at == c.at_ms and c.result == 'pending' and result ~= 'pending' then return end
  end
  redis.call('HSET', ck, name, c.result .. ' ' .. int(c.at_ms))
  redis.call('EXPIRE', ck, RETENTION)
end

-- check_prs resolves the PRs a check or status reaches: those the payload
-- names and those the sha index knows, ascending.
local function check_prs(c)
  local seen, out = {}, {}
  local function add(n)
    n = tonumber(n)
    if n and n > 0 and not seen[n] then seen[n] = true; out[#out + 1] = n end
  end
  for _, n in ipairs(c.prs) do add(n) end
  for _, n in ipairs(redis.call('SMEMBERS', k_index(repo, c.sha))) do add(n) end
  table.sort(out)
  return out
end

-- journaled_prs fixes, once per delivery, which PRs a check is journaled
-- under, so re-applying it after the index grew appends nothing new.
local function journaled_prs(prs)
  local rk = k_resolved(I.guid)
  local got = redis.call('GET', rk)
  if got then
    local out = {}
    for n in string.gmatch(got, '%d+') do out[#out + 1] = tonumber(n) end
    return out
  end
  local parts = {}
  for i, n in ipairs(prs) do parts[i] = int(n) end
  redis.call('SET', rk, '[' .. table.concat(parts, ',') .. ']', 'EX', wg_ttl)
  return prs
end

-- own_event journals the delivery's own event about subject. linked is
-- the session, session_ws of PR n when the caller has read them. built:
-- DATA is the event itself, built by the caller (I.ev_at), for the own
-- event about I.subject (Lua then builds no entry: the sessionid, when
-- linked, is the only part spliced in). fresh: as emit's.
local function own_event(subject, id, n, linked, built, fresh)
  local session
  if linked then
    if linked[1] and linked[2] == ws then session = linked[1] end
  elseif n and n > 0 then
    session = link(ws, repo, n)
  end
  local e = {
    id = id, source = I.source, type = I.type, subject = subject,
    time = I.time, workspace = ws, sessionid = session,
    priority = I.priority, coalescekey = I.coalescekey,
    terminal = I.terminal, summary = I.summary, data = DATA,
  }
  if not built then return emit(e, nil, fresh) end
  local ev = DATA
  if session then
    ev = table.concat({ string.sub(DATA, 1, I.ev_at), ',"sessionid":', cjson.encode(session),
      string.sub(DATA, I.ev_at + 1) })
  end
  emit(e, ev, fresh)
end

-- trailer_link applies a PR body's Wakegate-Session trailer (p.trailer)
-- after apply_pr (h is the PR's tracker hash as apply_pr left it): while
-- nothing links the PR (cur[5], read before), it
-- links it to that session of ws, marked session_via=trailer so that the
-- session's own claim (claim.lua) replaces it. A session the registry
-- does not know links nothing: wakegate.link_refused says so, once per
-- (PR, session). Returns the session linked now, or nil.
local function trailer_link(p, cur, h)
  if not p.trailer or p.trailer == '' or cur[5] then return nil end
  local n = p.number
  if not p.trailer_known then
    emit({
      id = 'link_refused/' .. repo .. '#' .. int(n) .. '/' .. p.trailer,
      source = p.server_source, type = 'wakegate.link_refused',
      subject = pr_subject(repo, n), time = NOW_TIME, workspace = ws,
      priority = 'internal',
      summary = 'PR #' .. int(n) .. ' (' .. repo .. ') names session ' .. p.trailer ..
        ' in a Wakegate-Session trailer; no such session: not linked',
      data = cjson.encode({ repo = repo, number = n, session = p.trailer, via = 'trailer', reason = 'unknown session' }),
    })
    return nil
  end
  redis.call('HSET', k_pr(repo, n), 'session', p.trailer, 'session_ws', ws, 'session_via', 'trailer')
  cur[5], cur[6] = p.trailer, ws
  h.session, h.session_ws, h.session_via = p.trailer, ws, 'trailer'
  return p.trailer
end

-- maxDeployPRs bounds the PRs a deployment status names.
local maxDeployPRs = 10

-- deploy_event journals a deployment status about its sha: the PRs whose
-- head the sha is or was (the sha index) are spliced into its data as
-- pull_requests, and it carries the sessionid of the first of them linked
-- in ws, so the router reaches those PRs' people too (docs/design.md §3).
local function deploy_event(id)
  local prs = {}
  for _, v in ipairs(redis.call('SMEMBERS', k_index(repo, I.deploy_sha))) do
    local n = tonumber(v)
    if n and n > 0 then prs[#prs + 1] = n end
  end
  table.sort(prs)
  local data, session = DATA, nil
  if #prs > 0 then
    local parts = {}
    for i = 1, math.min(#prs, maxDeployPRs) do
      parts[i] = int(prs[i])
      session = session or link(ws, repo, prs[i])
    end
    local list = '"pull_requests":[' .. table.concat(parts, ',') .. ']'
    if data == '' or string.match(data, '^%s*{%s*}%s*$') then
      data = '{' .. list .. '}'
    else
      data = string.gsub(data, '^%s*{', function() return '{' .. list .. ',' end, 1)
    end
  end
  emit({
    id = id, source = I.source, type = I.type, subject = I.subject,
    time = I.time, workspace = ws, sessionid = session,
    priority = I.priority, coalescekey = I.coalescekey,
    terminal = I.terminal, summary = I.summary, data = data,
  })
end

-- tr_apply folds one fact (the input table I and the raw data DATA) in;
-- ctx holds now_ms, now_time, settle_ms, retention and req (the input
-- itself for apply_one.lua, one table per repository for apply_batch.lua).
local function tr_apply(input, data, ctx)
  I, DATA = input, data
  tr_init(ARGV[4], ctx)
  ws, repo = I.workspace, I.repo
  SIDS = {}

  -- 1. Which PRs the fact reaches; stop before any write if a base's
  --    required checks are unknown.
  -- Each target's tracker hash is read here, once: the fold below keeps
  -- the PR's (hs[1]) up to date as it writes it, and the evaluation at the
  -- end reads these (a review or a check does not write a PR's hash).
  local targets = {}
  local cur -- a pull_request fact: its PR's stored base, state, updated_at, head, session, session_ws
  if I.pr then
    targets = { I.pr.number }
  elseif I.review then
    targets = { I.review.number }
  elseif I.check then
    targets = check_prs(I.check)
  end
  local hs, bases = {}, {}
  for i, n in ipairs(targets) do
    hs[i] = pr_hash(k_pr(repo, n))
    bases[#bases + 1] = hs[i].base
  end
  if I.pr then
    local h = hs[1]
    cur = { h.base, h.state, h.updated_at, h.head, h.session, h.session_ws }
  end
  if I.pr then bases[#bases + 1] = I.pr.base end
  local missing = missing_required(bases)
  if #missing > 0 then
    table.insert(missing, 1, 'need')
    return missing
  end

  -- 2. Fold the fact into the tracker.
  local trailed
  if I.pr then
    apply_pr(I.pr, cur, hs[1])
    trailed = trailer_link(I.pr, cur, hs[1])
  end
  if I.review then apply_review(I.review) end
  if I.check then apply_check(I.check) end

  -- 3. The delivery's own event(s).
  if I.type ~= '' then
    if I.deploy_sha and I.deploy_sha ~= '' then
      deploy_event(I.id ~= '' and I.id or I.guid)
    elseif I.subject ~= '' or not I.check then
      -- apply_pr writes none of the link's fields: what cur read stands
      local linked
      if cur and I.number == I.pr.number then linked = { cur[5], cur[6] } end
      -- A pull_request delivery's own event keyed by its guid: one guid is
      -- one payload, one updated_at, and the hash's updated_at (the
      -- newest applied, written in the same call as the event, and kept
      -- longer than its marker when RETENTION ≥ the journal's) below it
      -- proves this delivery never applied: no marker lookup
      -- (docs/design.md §2).
      local fresh = cur and I.id == '' and I.pr.updated_ms > 0
        and I.pr.updated_ms > (tonumber(cur[3]) or 0) and RETENTION >= wg_ttl
      own_event(I.subject, I.id ~= '' and I.id or I.guid, I.number, linked, I.ev_at, fresh)
    else
      local base_id = I.id ~= '' and I.id or I.guid
      local prs = journaled_prs(targets)
      if #prs == 0 then
        own_event(I.sha_subject, base_id, 0)
      end
      for _, n in ipairs(prs) do
        own_event(pr_subject(repo, n), base_id .. '/' .. int(n), n)
      end
    end
  end

  -- A trailer link the own event does not announce (an edit): the
  -- author's chain hears of the PR once, as after a late claim.
  if trailed and I.pr.action ~= 'opened' then
    local h = hs[1]
    local title = string.gsub(h.title or '', '[\r\n]+', ' ')
    synth(ws, repo, I.pr.number, h, 'linked', 'linked/' .. trailed, 'attention',
      'PR #' .. int(I.pr.number) .. ' linked to session ' .. trailed .. ': ' .. title .. ' (' .. repo .. ')',
      { session = trailed, state = h.state, via = 'trailer' })
  end

  -- 4. What the new state makes true.
  for i, n in ipairs(targets) do evaluate(ws, repo, n, nil, hs[i]) end

  table.insert(SIDS, 1, 'ok')
  return SIDS
end
