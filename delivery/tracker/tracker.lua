-- tracker.lua: functions shared by the PR tracker's scripts (apply.lua,
-- settle.lua, claim.lua). It is included after journal.AppendLua and before
-- the entry script, so it can call wg_append and read wg_ttl.
--
-- Every key here is under TAG, the hash tag of the journal shard of one
-- repository (journal.Tag(shard)); keys.go builds the same names in Go:
--
--   TAG:pr:<repo>#<n>          hash   the PR's tracker (fields below)
--   TAG:pr:<repo>#<n>:reviews  hash   reviewer → "<state> <at ms>"
--   TAG:sha:<repo>@<sha>       set    PR numbers that have had <sha> as head
--   TAG:checks:<repo>@<sha>    hash   check name → "<pass|fail|pending> <at ms>"
--   TAG:settle                 zset   "<ws>\n<repo>\n<n>\n<sha>" scored by due ms
--   TAG:resolved:<guid>        string PR numbers a check delivery was journaled under
--
-- Tracker hash fields (docs/design.md §3, §14: one letter or two, the
-- names cost bytes in every PR's hash): w (workspace), s (state:
-- open|closed), d (draft 0|1), m (merged 0|1), h (head), hs (ms the head
-- first appeared), b (base), a (author), t (title), l (labels, JSON),
-- u (ms of the newest snapshot applied), session, session_ws,
-- session_via ("trailer" while a Wakegate-Session trailer made the link),
-- r and f (the journal stream id of the ready or checks_failed entry of
-- the current head h; a head change moves them to ready:<sha> and
-- failed:<sha> of the head they were for). Hashes written before
-- 2026-12-06 name the fields ws, state, draft, merged, head,
-- head_seen_at, base, author, title, labels, updated_at and keep every
-- head's ready:<sha> / failed:<sha> (before 2026-12-05 the ms it was
-- emitted: only the field's presence is read), and before 2026-12-05 also
-- repo and number: pr_hash reads both layouts (a short name wins), and
-- apply_pr rewrites a hash of the long layout in the short one.

local TAG          -- hash tag of the shard
local NOW_MS       -- the caller's now, ms since the epoch
local NOW_TIME     -- the same instant, RFC 3339
local SETTLE_MS    -- WAKEGATE_READY_SETTLE in ms
local RETENTION    -- seconds per-sha keys and closed PRs are kept
local REQ          -- base branch → required check names ('*' = every base)
local SIDS = {}    -- stream ids this call appended

local function tr_init(tag, c)
  TAG = tag
  NOW_MS = tonumber(c.now_ms)
  NOW_TIME = c.now_time
  SETTLE_MS = tonumber(c.settle_ms)
  RETENTION = tonumber(c.retention)
  REQ = c.req or {}
end

-- int renders a number the way Go's %d does (tostring would say 2.0e+12).
local function int(n) return string.format('%d', n) end

local function k_pr(repo, n) return TAG .. ':pr:' .. repo .. '#' .. int(n) end
local function k_reviews(repo, n) return k_pr(repo, n) .. ':reviews' end
local function k_index(repo, sha) return TAG .. ':sha:' .. repo .. '@' .. sha end
local function k_checks(repo, sha) return TAG .. ':checks:' .. repo .. '@' .. sha end
local function k_settle() return TAG .. ':settle' end
local function k_resolved(guid) return TAG .. ':resolved:' .. guid end

local function pr_subject(repo, n) return 'github:' .. repo .. '#' .. int(n) end
local function gh_source(repo) return '//github.com/' .. repo end

-- hash reads a whole hash into a table.
local function hash(key)
  local flat = redis.call('HGETALL', key)
  local t = {}
  for i = 1, #flat, 2 do t[flat[i]] = flat[i + 1] end
  return t
end

-- PR_LONG maps a tracker hash field's stored name to the name the
-- scripts use for it (the previous layout's); PR_SHORT is its inverse.
-- LEGACY lists the previous layout's names a rewrite deletes.
local PR_LONG = { w = 'ws', s = 'state', d = 'draft', m = 'merged', h = 'head',
  hs = 'head_seen_at', b = 'base', a = 'author', t = 'title', l = 'labels', u = 'updated_at',
  r = 'ready_at_head', f = 'failed_at_head' }
local PR_SHORT = {}
for k, v in pairs(PR_LONG) do PR_SHORT[v] = k end
local LEGACY = { 'ws', 'state', 'draft', 'merged', 'head', 'head_seen_at', 'base', 'author', 'title',
  'labels', 'updated_at', 'repo', 'number' }

-- pr_hash reads a PR's tracker hash into a table keyed by the long names
-- (either layout, a short name winning); legacy is true when the hash
-- holds fields of the previous layout.
local function pr_hash(key)
  local flat = redis.call('HGETALL', key)
  local t, legacy = {}, false
  for i = 1, #flat, 2 do
    local k = flat[i]
    local long = PR_LONG[k]
    if long then
      t[long] = flat[i + 1]
    else
      if PR_SHORT[k] or k == 'repo' or k == 'number' then legacy = true end
      t[k] = flat[i + 1]
    end
  end
  if legacy then
    -- both layouts (a rewrite that has not happened yet): short names win
    for i = 1, #flat, 2 do
      local long = PR_LONG[flat[i]]
      if long then t[long] = flat[i + 1] end
    end
    t.legacy = true
  end
  return t
end

-- ready_at / failed_at: the stream id of the ready / checks_failed entry
-- of head sha (h's r or f when sha is its head, else ready:<sha> or
-- failed:<sha>, written for a former head or by the previous layout).
local function ready_at(h, sha)
  if sha == h.head and h.ready_at_head then return h.ready_at_head end
  return h['ready:' .. sha]
end
local function failed_at(h, sha)
  if sha == h.head and h.failed_at_head then return h.failed_at_head end
  return h['failed:' .. sha]
end

-- pair splits "<word> <ms>" into the word and the number.
local function pair(v)
  local a, b = string.match(v, '^(%S+) (%S+)$')
  return a, tonumber(b)
end

-- required returns the required check names of a base branch, or nil when
-- the caller did not pass them (the script must then answer 'need' before
-- writing anything).
local function required(base)
  local r = REQ[base]
  if r == nil then r = REQ['*'] end
  return r
end

-- missing_required lists the bases whose required checks were not passed.
local function missing_required(bases)
  local out, seen = {}, {}
  for _, b in ipairs(bases) do
    if b and b ~= '' and required(b) == nil and not seen[b] then
      seen[b] = true
      out[#out + 1] = b
    end
  end
  return out
end

-- link returns the session a PR is linked to, when linked from workspace ws.
local function link(ws, repo, n)
  local v = redis.call('HMGET', k_pr(repo, n), 'session', 'session_ws')
  if v[1] and v[2] == ws then return v[1] end
  return nil
end

-- linked_session is link's answer from the PR's tracker hash h, already read.
local function linked_session(h, ws)
  if h.session_ws == ws then return h.session end
  return nil
end

-- index records that PR n has (had) sha as its head.
local function index(repo, sha, n)
  local k = k_index(repo, sha)
  redis.call('SADD', k, int(n))
  redis.call('EXPIRE', k, RETENTION)
end

-- emit journals e once per (source, id), remembers a new entry's id and
-- returns the entry's stream id (new or the one journaled before);
-- ev is e's entry when the caller has it already (the compact form the
-- worker builds, or the JSON form of before: journal.decode reads both);
-- fresh as wg_append's (the caller's tracker state says e was never
-- journaled).
local function emit(e, ev, fresh)
  if not e.coalescekey or e.coalescekey == '' then e.coalescekey = e.subject end
  local sid, added = wg_append(TAG, ev or wg_entry(e), e.workspace, e.source, e.id, fresh)
  if added == 1 then
    SIDS[#SIDS + 1] = sid
    if e.terminal then wg_terminal(TAG, e.workspace, e.subject, e.type, e.time, e.summary or '', sid) end
  end
  return sid
end

-- synth journals a state transition the tracker derived about PR n, whose
-- tracker hash is h: type github.pull_request.<typ>, id "pr/<n>/<what>",
-- data {repo, number, head, title, url} plus extra; returns the entry's
-- stream id. fresh: as emit's.
-- The data is built as one table.concat (Lua hashes every string it builds).
local function synth(ws, repo, n, h, typ, what, priority, summary, extra, fresh)
  local enc, ns = cjson.encode, int(n)
  local title = enc(h.title or '')
  local d, pre
  if wg_subject_repo(pr_subject(repo, n)) == repo then
    -- the data with the compact entry's tokens in place (wg_entry's pre):
    -- the same bytes once expanded, and nothing for Lua to search
    local resc = string.gsub(repo, '/', '\\/')
    pre = { title = string.sub(title, 2, -2) }
    d = { '\22', resc, '\23', ns }
    if h.head then
      local sha = string.sub(what, -40)
      if #h.head == 40 and sha == h.head and string.find(sha, '^%x+$') then
        d[5] = ',"head":"\1\25\4"'
      else
        d[5] = ',"head":' .. enc(h.head) .. ',"title":"\4"'
      end
    else
      d[5] = ',"title":"\4"'
    end
    d[6] = ',\20'
    d[7] = resc
    d[8] = '\\/pull\\/' .. ns .. '"'
  else
    d = { '{"repo":', enc(repo), ',"number":', ns }
    if h.head then
      d[5], d[6] = ',"head":', enc(h.head)
    end
    d[#d + 1] = ',"title":'
    d[#d + 1] = title
    d[#d + 1] = ',"url":'
    d[#d + 1] = enc('https://github.com/' .. repo .. '/pull/' .. ns)
  end
  if extra then
    local x = enc(extra) -- its keys are none of the above
    if x ~= '{}' then
      d[#d + 1] = ','
      d[#d + 1] = string.sub(x, 2, -2)
    end
  end
  d[#d + 1] = '}'
  local e = {
    id = 'pr/' .. ns .. '/' .. what, source = gh_source(repo),
    type = 'github.pull_request.' .. typ, subject = pr_subject(repo, n),
    time = NOW_TIME, workspace = ws, sessionid = linked_session(h, ws),
    priority = priority, summary = summary,
    data = table.concat(d),
  }
  if not e.coalescekey then e.coalescekey = e.subject end
  return emit(e, pre and wg_entry(e, pre), fresh)
end

-- ready_entry journals the ready of PR n at head (h its tracker hash) as
-- synth would, when that is the common case: the subject's repository
-- one wg_entry writes compact, head a 40-digit hex sha, the title on one
-- line. It builds the compact entry in one table.concat, byte for byte
-- what synth and wg_entry(e, pre) build (TestReadyEntry), without the
-- event table, the data as a string of its own and the searches wg_entry
-- repeats (the repository's pattern, its escaping, the sha's digits, the
-- JSON of the id, type, subject and time). Returns the entry's stream id,
-- or nil when it is not that case (the caller then calls synth).
local function ready_entry(ws, repo, n, h, head, fresh)
  local title = h.title or ''
  if #head ~= 40 or string.find(title, '\n', 1, true) or string.find(title, '\r', 1, true)
    or not string.find(head, '^%x+$') or wg_subject_repo('github:' .. repo .. '#') ~= repo then
    return nil
  end
  local ns = int(n)
  local tj = cjson.encode(title)
  tj = string.sub(tj, 2, -2)
  local resc = string.gsub(repo, '/', '\\/')
  local summary = 'PR #' .. ns .. ' ready: ' .. tj .. ' (\3)"'
  if tj ~= '' then
    local i = string.find(summary, tj, 1, true)
    summary = string.sub(summary, 1, i - 1) .. '\4' .. string.sub(summary, i + #tj)
  end
  local session = linked_session(h, ws)
  local p = { '\1', repo, '\0', tj, '\0', head, '\0\5"pr\\/', ns, '\\/ready\\/\1"\6\7ready"\8\2#', ns,
    '"\11', wg_tail(NOW_TIME) }
  if session and session ~= '' then p[#p + 1] = ',"sessionid":' .. cjson.encode(session) end
  p[#p + 1] = '\12\16'
  p[#p + 1] = summary
  p[#p + 1] = '\17\22'
  p[#p + 1] = resc
  p[#p + 1] = '\23'
  p[#p + 1] = ns
  p[#p + 1] = ',"head":"\1\25\4",\20'
  p[#p + 1] = resc
  p[#p + 1] = '\\/pull\\/'
  p[#p + 1] = ns
  p[#p + 1] = '"}}'
  local sid, added = wg_append(TAG, table.concat(p), ws, gh_source(repo), 'pr/' .. ns .. '/ready/' .. head, fresh)
  if added == 1 then SIDS[#SIDS + 1] = sid end
  return sid
end

-- results reads the latest result per check name at sha.
local function results(repo, sha)
  local out = {}
  for name, v in pairs(hash(k_checks(repo, sha))) do
    out[name] = pair(v)
  end
  return out
end

-- changes_requested reports whether any reviewer's standing review of PR n
-- is changes_requested.
local function changes_requested(repo, n)
  for _, v in ipairs(redis.call('HVALS', k_reviews(repo, n))) do
    if pair(v) == 'changes_requested' then return true end
  end
  return false
end

-- summary_title is h's title on one line, for a summary: evaluate calls
-- it only when it journals a transition (a pattern search costs about a
-- microsecond of Redis).
local function summary_title(h)
  return (string.gsub(h.title or '', '[\r\n]+', ' '))
end

local function settle_member(ws, repo, n, sha)
  return ws .. '\n' .. repo .. '\n' .. int(n) .. '\n' .. sha
end

-- checks_pass decides "every required check passed at head". With no
-- required checks: nothing pending or failing and at least one result; or
-- nothing reported at all and the settle time passed since the head
-- appeared (scheduled in the settle zset until then).
local function checks_pass(ws, repo, n, h, res, failing)
  local req
  if h.base and h.base ~= '' then req = required(h.base) else req = REQ['*'] or {} end
  -- the entry scripts check every base they may evaluate before writing
  if req == nil then error('tracker: required checks of base ' .. h.base .. ' not passed') end
  if #req > 0 then
    for _, name in ipairs(req) do
      -- a suite never stands in for a required check
      if string.sub(name, 1, 6) == 'suite:' or res[name] ~= 'pass' then return false end
    end
    return true
  end
  local any, pending = false, false
  for _, r in pairs(res) do
    any = true
    if r ~= 'pass' and r ~= 'fail' then pending = true end
  end
  if any then return not failing and not pending end
  local due = (tonumber(h.head_seen_at) or NOW_MS) + SETTLE_MS
  if NOW_MS >= due then return true end
  redis.call('ZADD', k_settle(), due, settle_member(ws, repo, n, h.head))
  return false
end

-- evaluate re-derives ready / checks_failed of PR n at its head (only when
-- the head is still only_sha, if given) and journals each transition once
-- per head sha. h is the PR's tracker hash when the caller has just read
-- it (nil: read it here).
--
-- The hash's r / f field (ready:<sha> / failed:<sha> for a former head)
-- is written in the same call
-- as the entry, and the hash lives at least as long as the entry's dedup
-- marker when RETENTION ≥ the journal's retention (an open PR's hash has
-- no TTL, a closed one's RETENTION): its absence then proves the
-- transition was never journaled, and its marker is not looked up
-- (docs/design.md §2, §3 PR readiness).
local function evaluate(ws, repo, n, only_sha, h)
  local pk = k_pr(repo, n)
  h = h or pr_hash(pk)
  local fresh = RETENTION >= wg_ttl
  local head = h.head
  if h.state ~= 'open' or not head or head == '' then return end
  if only_sha and only_sha ~= head then return end
  local res = results(repo, head)
  local failed = {}
  for name, r in pairs(res) do
    if r == 'fail' then failed[#failed + 1] = name end
  end
  table.sort(failed)
  if #failed > 0 and not failed_at(h, head) then
    local priority = 'attention'
    if ready_at(h, head) then priority = 'critical' end
    -- name the failing checks a person knows (runs, statuses), not suite ids
    local named = {}
    for _, name in ipairs(failed) do
      if string.sub(name, 1, 6) ~= 'suite:' then named[#named + 1] = name end
    end
    local what = 'a check suite'
    if #named > 0 then what = table.concat(named, ', ') end
    local sid = synth(ws, repo, n, h, 'checks_failed', 'checks_failed/' .. head, priority,
      'PR #' .. int(n) .. ' checks failed (' .. what .. '): ' .. summary_title(h) .. ' (' .. repo .. ')',
      { failed = failed }, fresh)
    redis.call('HSET', pk, 'f', sid)
    h.failed_at_head = sid
  end
  if ready_at(h, head) or h.draft == '1' then return end
  -- the reviews are read only when the checks would make it ready (a PR
  -- scheduled for its settle time with changes requested is settled to
  -- nothing then)
  if not checks_pass(ws, repo, n, h, res, #failed > 0) or changes_requested(repo, n) then return end
  local sid = ready_entry(ws, repo, n, h, head, fresh) or synth(ws, repo, n, h, 'ready', 'ready/' .. head, 'attention',
    'PR #' .. int(n) .. ' ready: ' .. summary_title(h) .. ' (' .. repo .. ')', nil, fresh)
  redis.call('HSET', pk, 'r', sid)
  h.ready_at_head = sid
end
