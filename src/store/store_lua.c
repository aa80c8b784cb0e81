/* The store's server-side scripts (Lua, run by EVALSHA; EVAL on NOSCRIPT).
 * Contracts (KEYS and ARGV layouts, reply shapes) are in docs/store.md and
 * mirrored by the builders and decoders in store_codec.c. Reply codes: 0 ok,
 * 1 AlreadyExists, 2 Conflict, 3 NotFound, 4 Expired, 8 Fenced.
 *
 * Scripts never decode JSON (cjson would turn [] into {} and round big
 * integers): the client sends the object split around its resourceVersion
 * value (head, tail) and the script splices in the new counter value. Steps
 * that can fail (XADD with an explicit ID) run before any other write, since
 * Redis does not roll back a script that fails halfway; but for the counter
 * and an attached create's index entry (write_batch): the ID is the
 * counter's fresh value, above every ID in the stream, so that XADD cannot
 * fail but on a counter set back by hand. */
#include "store_int.h"

#define STORE_LUA_STR_(x) #x
#define STORE_LUA_STR(x) STORE_LUA_STR_(x)

/* Shared by the write scripts: append one change to a history stream (ID
 * "<rv>-0"), and trim it, recording in the floor key the highest
 * resourceVersion that may have been trimmed (history is complete above it).
 *
 * History is kept by time and bounded by count. The marks key (a sorted set)
 * holds, for each second in which the resource was written, the first
 * version written in it (member: the second of Redis's TIME, score: that
 * version), so versions below a mark were written before its second. The
 * first write of a new second pops the marks of seconds at least secs old,
 * and trims the stream below the last one popped: what goes was written
 * more than secs seconds ago. Then the stream is cut to maxlen entries
 * whatever their age. A clock that steps back only keeps more (the walk
 * stops at the first mark not old enough, in version order). first: the
 * first version this script wrote (nil: it wrote nothing). */
#define STORE_LUA_EMIT                                                             \
    "local function emit(ev, typ, rvs, ns, name, obj)\n"                           \
    "  redis.call('XADD', ev, rvs .. '-0', 'type', typ, 'ns', ns, 'name', name,\n"  \
    "             'obj', obj)\n"                                                   \
    "end\n"                                                                        \
    "local clock\n"                                                               \
    "local function trim(ev, floor, marks, mode, maxlen, secs, first)\n"          \
    "  if not first then return end\n"                                            \
    "  local n, keep = 0, tonumber(secs)\n"                                       \
    "  if keep > 0 then\n"                                                        \
    "    clock = clock or tonumber(redis.call('TIME')[1])\n"                      \
    "    local now = clock\n"                                                     \
    "    if redis.call('ZADD', marks, 'NX', first, now) == 1 then\n"              \
    "      local minid\n"                                                         \
    "      local m = redis.call('ZRANGE', marks, 0, 0, 'WITHSCORES')\n"           \
    "      while m[1] and tonumber(m[1]) <= now - keep do\n"                      \
    "        minid = string.format('%d', tonumber(m[2]))\n"                       \
    "        redis.call('ZREM', marks, m[1])\n"                                    \
    "        m = redis.call('ZRANGE', marks, 0, 0, 'WITHSCORES')\n"               \
    "      end\n"                                                                 \
    "      if minid then n = redis.call('XTRIM', ev, 'MINID', mode, minid) end\n" \
    "    end\n"                                                                   \
    "  end\n"                                                                     \
    "  n = n + redis.call('XTRIM', ev, 'MAXLEN', mode, maxlen)\n"                 \
    "  if n > 0 then\n"                                                           \
    "    local head = redis.call('XRANGE', ev, '-', '+', 'COUNT', 1)\n"           \
    "    local fid = tonumber(string.match(head[1][1], '^(%d+)'))\n"              \
    "    redis.call('SET', floor, string.format('%d', fid - 1))\n"                \
    "  end\n"                                                                     \
    "end\n"

/* KEYS: rv obj idx ev floor marks [nsobj]
 * ARGV: member name ns head tail maxlen trim secs [nsfield]
 * -> {0, rv} | {1, existing rv} | {5} (the namespace object nsfield ("o:/ns")
 * of hash nsobj does not exist) | {6} (the namespace is being deleted: its
 * marker "t:/ns" is set); the namespace is checked only when both are given */
static const char lua_create[] =
    STORE_LUA_EMIT
    "if KEYS[7] and redis.call('HEXISTS', KEYS[7], ARGV[9]) == 0 then return {5} end\n"
    "if KEYS[7] and redis.call('HEXISTS', KEYS[7], 't' .. string.sub(ARGV[9], 2)) == 1 then return {6} end\n"
    "local cur = redis.call('HGET', KEYS[2], 'v:' .. ARGV[1])\n"
    "if cur then return {1, cur} end\n"
    "local rvs = string.format('%d', redis.call('INCR', KEYS[1]))\n"
    "local obj = ARGV[4] .. rvs .. ARGV[5]\n"
    "emit(KEYS[4], 'ADDED', rvs, ARGV[3], ARGV[2], obj)\n"
    "redis.call('HSET', KEYS[2], 'o:' .. ARGV[1], obj, 'v:' .. ARGV[1], rvs)\n"
    "redis.call('ZADD', KEYS[3], 0, ARGV[1])\n"
    "trim(KEYS[4], KEYS[5], KEYS[6], ARGV[7], ARGV[6], ARGV[8], rvs)\n"
    "return {0, rvs}\n";

/* KEYS: rv obj idx ev floor marks [fence]
 * ARGV: member name ns head tail maxlen trim secs expected_rv op(put|del) [fence_value]
 * -> {0, rv} | {2, current rv} | {3} | {8, what the fence key holds ("": nothing)}
 * A fence (both given) is a precondition outside the object: the write is
 * made only while that key holds fence_value (a lease's epoch). */
static const char lua_cas[] =
    STORE_LUA_EMIT
    "if KEYS[7] then\n"
    "  local held = redis.call('GET', KEYS[7]) or ''\n"
    "  if held ~= ARGV[11] then return {8, held} end\n"
    "end\n"
    "local cur = redis.call('HGET', KEYS[2], 'v:' .. ARGV[1])\n"
    "if not cur then return {3} end\n"
    "if cur ~= ARGV[9] then return {2, cur} end\n"
    "local rvs = string.format('%d', redis.call('INCR', KEYS[1]))\n"
    "local obj = ARGV[4] .. rvs .. ARGV[5]\n"
    "if ARGV[10] == 'del' then\n"
    "  emit(KEYS[4], 'DELETED', rvs, ARGV[3], ARGV[2], obj)\n"
    "  redis.call('HDEL', KEYS[2], 'o:' .. ARGV[1], 'v:' .. ARGV[1], 't:' .. ARGV[1])\n"
    "  redis.call('ZREM', KEYS[3], ARGV[1])\n"
    "else\n"
    "  emit(KEYS[4], 'MODIFIED', rvs, ARGV[3], ARGV[2], obj)\n"
    "  redis.call('HSET', KEYS[2], 'o:' .. ARGV[1], obj, 'v:' .. ARGV[1], rvs)\n"
    "end\n"
    "trim(KEYS[4], KEYS[5], KEYS[6], ARGV[7], ARGV[6], ARGV[8], rvs)\n"
    "return {0, rvs}\n";

/* KEYS: rv obj idx floor
 * ARGV: start_after(member, "" = first) limit(0 = all) token_rv(0 = none) ns("" = all)
 *       max_bytes(0 = none: with a limit, the page ends before its objects pass it; one object at least;
 *       a packed object, first byte 1, counts as STORE_PACK_MAX_RATIO times its bytes, which its JSON
 *       never passes: store_pack.c)
 * -> {0, rv, last_member_or_"", remaining, obj...} | {4, rv, floor}
 * A namespace is the index range ["ns/", "ns0"): '0' follows '/' in ASCII. */
static const char lua_list[] =
    "local rv = redis.call('GET', KEYS[1]) or '0'\n"
    "local trv = tonumber(ARGV[3])\n"
    "if trv > 0 then\n"
    "  local floor = redis.call('GET', KEYS[4]) or '0'\n"
    "  if trv < tonumber(floor) then return {4, rv, floor} end\n"
    "end\n"
    "local lo, hi = '-', '+'\n"
    "if ARGV[4] ~= '' then lo, hi = '[' .. ARGV[4] .. '/', '(' .. ARGV[4] .. '0' end\n"
    "if ARGV[1] ~= '' then lo = '(' .. ARGV[1] end\n"
    "local limit = tonumber(ARGV[2])\n"
    "local names\n"
    "if limit > 0 then\n"
    "  names = redis.call('ZRANGE', KEYS[3], lo, hi, 'BYLEX', 'LIMIT', 0, limit + 1)\n"
    "else\n"
    "  names = redis.call('ZRANGE', KEYS[3], lo, hi, 'BYLEX')\n"
    "end\n"
    "local last, remaining = '', 0\n"
    "if limit > 0 and #names > limit then\n"
    "  names[#names] = nil\n"
    "  last = names[#names]\n"
    "  remaining = redis.call('ZLEXCOUNT', KEYS[3], '(' .. last, hi)\n"
    "end\n"
    "local out = {0, rv, last, remaining}\n"
    "local maxb = limit > 0 and tonumber(ARGV[5]) or 0\n"
    "local function size(o)\n"
    "  if string.byte(o, 1) == 1 then return #o * " STORE_LUA_STR(STORE_PACK_MAX_RATIO) " end\n"
    "  return #o\n"
    "end\n"
    "local bytes, cut = 0, nil\n"
    "local i = 1\n"
    "while i <= #names and not cut do\n"
    "  local j = math.min(i + 999, #names)\n"
    "  local fields = {}\n"
    "  for k = i, j do fields[#fields + 1] = 'o:' .. names[k] end\n"
    "  local objs = redis.call('HMGET', KEYS[2], unpack(fields))\n"
    "  for k = 1, #fields do\n"
    "    local o = objs[k] or ''\n"
    "    local n = maxb > 0 and size(o) or 0\n"
    "    if maxb > 0 and #out > 4 and bytes + n > maxb then cut = i + k - 2 break end\n"
    "    bytes = bytes + n\n"
    "    out[#out + 1] = o\n"
    "  end\n"
    "  i = j + 1\n"
    "end\n"
    "if cut then\n"
    "  out[3] = names[cut]\n"
    "  out[4] = redis.call('ZLEXCOUNT', KEYS[3], '(' .. names[cut], hi)\n"
    "end\n"
    "return out\n";

/* KEYS: ev floor rv
 * ARGV: after_rv count ns has_ns
 * -> {0, rv, last_scanned_rv, scanned, [rv type ns name obj]...} | {4, rv, floor} */
static const char lua_history[] =
    "local rv = redis.call('GET', KEYS[3]) or '0'\n"
    "local floor = redis.call('GET', KEYS[2]) or '0'\n"
    "if tonumber(ARGV[1]) < tonumber(floor) then return {4, rv, floor} end\n"
    "local es = redis.call('XRANGE', KEYS[1], '(' .. ARGV[1] .. '-0', '+', 'COUNT', ARGV[2])\n"
    "local last = ARGV[1]\n"
    "if #es > 0 then last = string.match(es[#es][1], '^(%d+)') end\n"
    "local out = {0, rv, last, #es}\n"
    "for _, e in ipairs(es) do\n"
    "  local f = e[2]\n"
    "  if ARGV[4] ~= '1' or f[4] == ARGV[3] then\n"
    "    out[#out + 1] = string.match(e[1], '^(%d+)')\n"
    "    out[#out + 1] = f[2]\n"
    "    out[#out + 1] = f[4]\n"
    "    out[#out + 1] = f[6]\n"
    "    out[#out + 1] = f[8]\n"
    "  end\n"
    "end\n"
    "return out\n";

/* KEYS: rv obj idx ev floor marks
 * ARGV: ns maxlen trim secs, then per object: member name head tail
 * -> per object, in order: its new rv (a string) or 1 (AlreadyExists).
 * Objects are created one after the other; a duplicate fails alone. */
static const char lua_create_batch[] =
    STORE_LUA_EMIT
    "local out, first = {}, nil\n"
    "for i = 5, #ARGV, 4 do\n"
    "  local member = ARGV[i]\n"
    "  if redis.call('HEXISTS', KEYS[2], 'v:' .. member) == 1 then\n"
    "    out[#out + 1] = 1\n"
    "  else\n"
    "    local rvs = string.format('%d', redis.call('INCR', KEYS[1]))\n"
    "    local obj = ARGV[i + 2] .. rvs .. ARGV[i + 3]\n"
    "    emit(KEYS[4], 'ADDED', rvs, ARGV[1], ARGV[i + 1], obj)\n"
    "    redis.call('HSET', KEYS[2], 'o:' .. member, obj, 'v:' .. member, rvs)\n"
    "    redis.call('ZADD', KEYS[3], 0, member)\n"
    "    out[#out + 1] = rvs\n"
    "    first = first or rvs\n"
    "  end\n"
    "end\n"
    "trim(KEYS[4], KEYS[5], KEYS[6], ARGV[3], ARGV[2], ARGV[4], first)\n"
    "return out\n";

/* KEYS: rv obj idx ev floor marks nsobj [aobj aidx aev afloor amarks]
 * ARGV: maxlen trim secs, then per write: [f key value] op(c|p|d|a) member name ns head tail expected_rv
 *       nscheck(1|0)
 * -> per write, in order, a pair: {0, rv} | {1, existing rv} | {2, current rv} | {3, ""} | {5, ""} | {6, ""}
 *    | {7, ""} (a: the write before it was not stored) | {8, what key holds ("": nothing)} (fenced)
 * An f before a write is its fence, a precondition outside the object: the
 * write is made only while Redis key `key` holds `value` (a lease's epoch;
 * the key is not declared: a single Redis, as the controllers' fence script). It
 * answers nothing of its own.
 * The writes of a loop turn to one resource, in one call: each is the create
 * (c) or compare-and-set (p: put, d: delete) the single scripts do, with its
 * own outcome; the stream is trimmed once at the end. A namespace is checked
 * once a call (nothing here writes namespaces). An a right after a write is
 * a create in the attached resource (the a-keys) made with it, only when the
 * write is stored, for three commands: one INCRBY gives both their versions,
 * ZADD NX to the index both checks its name and claims it (a name taken
 * gives the version back: DECR, so versions stay gapless), then XADD and
 * HSET. */
static const char lua_write_batch[] =
    STORE_LUA_EMIT
    "local out, first, afirst, nsok = {}, nil, nil, {}\n"
    "local function nscode(ns)\n"
    "  local c = nsok[ns]\n"
    "  if not c then\n"
    "    local f = redis.call('HMGET', KEYS[7], 'o:/' .. ns, 't:/' .. ns)\n"
    "    c = (not f[1]) and 5 or (f[2] and 6 or 0)\n"
    "    nsok[ns] = c\n"
    "  end\n"
    "  return c\n"
    "end\n"
    "local i = 4\n"
    "while i <= #ARGV do\n"
    "  local fenced\n"
    "  if ARGV[i] == 'f' then\n"
    "    local held = redis.call('GET', ARGV[i + 1]) or ''\n"
    "    if held ~= ARGV[i + 2] then fenced = held end\n"
    "    i = i + 3\n"
    "  end\n"
    "  local op, member, name, ns = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3]\n"
    "  local cur = redis.call('HGET', KEYS[2], 'v:' .. member)\n"
    "  local code, val = 0, ''\n"
    "  if fenced then code, val = 8, fenced\n"
    "  elseif op == 'c' then\n"
    "    if ARGV[i + 7] == '1' then code = nscode(ns) end\n"
    "    if code == 0 and cur then code, val = 1, cur end\n"
    "  elseif not cur then code = 3\n"
    "  elseif cur ~= ARGV[i + 6] then code, val = 2, cur end\n"
    "  local a = ARGV[i + 8] == 'a' and i + 8 or nil\n"
    "  local acode, aval = 7, ''\n"
    "  if a and code == 0 then\n"
    "    acode = ARGV[a + 7] == '1' and nscode(ARGV[a + 3]) or 0\n"
    "  end\n"
    "  if code == 0 then\n"
    "    local n = acode == 0 and 2 or 1\n"
    "    local top = redis.call('INCRBY', KEYS[1], n)\n"
    "    val = string.format('%d', top - n + 1)\n"
    "    first = first or val\n"
    "    local obj = ARGV[i + 4] .. val .. ARGV[i + 5]\n"
    "    if op == 'd' then\n"
    "      emit(KEYS[4], 'DELETED', val, ns, name, obj)\n"
    "      redis.call('HDEL', KEYS[2], 'o:' .. member, 'v:' .. member, 't:' .. member)\n"
    "      redis.call('ZREM', KEYS[3], member)\n"
    "    else\n"
    "      emit(KEYS[4], op == 'c' and 'ADDED' or 'MODIFIED', val, ns, name, obj)\n"
    "      redis.call('HSET', KEYS[2], 'o:' .. member, obj, 'v:' .. member, val)\n"
    "      if op == 'c' then redis.call('ZADD', KEYS[3], 0, member) end\n"
    "    end\n"
    "    if acode == 0 then\n"
    "      aval = string.format('%d', top)\n"
    "      local am = ARGV[a + 1]\n"
    "      if redis.call('ZADD', KEYS[9], 'NX', 0, am) == 0 then\n"
    "        redis.call('DECR', KEYS[1])\n"
    "        acode, aval = 1, redis.call('HGET', KEYS[8], 'v:' .. am) or ''\n"
    "      else\n"
    "        afirst = afirst or aval\n"
    "        local aobj = ARGV[a + 4] .. aval .. ARGV[a + 5]\n"
    "        emit(KEYS[10], 'ADDED', aval, ARGV[a + 3], ARGV[a + 2], aobj)\n"
    "        redis.call('HSET', KEYS[8], 'o:' .. am, aobj, 'v:' .. am, aval)\n"
    "      end\n"
    "    end\n"
    "  end\n"
    "  out[#out + 1] = code\n"
    "  out[#out + 1] = val\n"
    "  i = i + 8\n"
    "  if a then\n"
    "    out[#out + 1] = acode\n"
    "    out[#out + 1] = aval\n"
    "    i = i + 8\n"
    "  end\n"
    "end\n"
    "trim(KEYS[4], KEYS[5], KEYS[6], ARGV[2], ARGV[1], ARGV[3], first)\n"
    "if KEYS[8] then trim(KEYS[10], KEYS[11], KEYS[12], ARGV[2], ARGV[1], ARGV[3], afirst) end\n"
    "return out\n";

const char *const store_scripts[STORE_NSCRIPTS] = {
    [STORE_SCRIPT_WRITE_BATCH] = lua_write_batch,
    [STORE_SCRIPT_CREATE] = lua_create,
    [STORE_SCRIPT_CAS] = lua_cas,
    [STORE_SCRIPT_LIST] = lua_list,
    [STORE_SCRIPT_HISTORY] = lua_history,
    [STORE_SCRIPT_CREATE_BATCH] = lua_create_batch,
};
