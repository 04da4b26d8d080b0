//! The Lua scripts that change an inbox atomically on the Redis node that
//! holds it (each touches one key, so they run unchanged on a Cluster).
//!
//! An inbox is one Redis string (see the crate docs for the layout): a
//! 16-byte header (floor, state, count) then `slots` 8-byte big-endian keys,
//! the first `count` of them used, ascending. Keys are compared as bytes
//! (big-endian order is numeric order): Lua's numbers are doubles and cannot
//! hold a 64-bit key, and its string `<` follows the server's locale.

/// Shared helpers. `gt(a, b)`: 8-byte key `a` above `b`. `write`: stores an
/// inbox, trimming it to `cap` once it holds more than `cap + slack` keys
/// (the floor rises to the newest key trimmed) and leaving free slots so
/// that most deliveries write 12 bytes in place.
const PRELUDE: &str = r"
local function gt(a, b)
  for i = 1, 8 do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  return false
end
local function entry(s, base, i)
  return string.sub(s, base + i * 8 + 1, base + i * 8 + 8)
end
local function effective_floor(floor, s, base, n, cap)
  if n > cap then
    local t = entry(s, base, n - cap - 1)
    if gt(t, floor) then return t end
  end
  return floor
end
local function write(k, floor, state, entries, n, cap, slack)
  if n > cap + slack then
    local cut = n - cap
    local t = entry(entries, 0, cut - 1)
    if gt(t, floor) then floor = t end
    entries = string.sub(entries, cut * 8 + 1)
    n = cap
  end
  local slots
  if n >= cap then
    slots = cap + slack
  else
    slots = math.min(cap + slack, n + math.max(math.floor(n / 4), 4))
  end
  redis.call('SET', k, floor .. state .. '\0\0\0' .. struct.pack('>I4', n) .. entries .. string.rep('\0', (slots - n) * 8))
end
";

/// KEYS[1] inbox; ARGV: key (8 bytes), cap, slack. Returns 1 when the
/// inbox took the key (present, above its floor, not held yet), else 0.
const DELIVER: &str = r"
local k, key = KEYS[1], ARGV[1]
local cap, slack = tonumber(ARGV[2]), tonumber(ARGV[3])
local h = redis.call('GETRANGE', k, 0, 15)
if #h < 16 then return 0 end
local n = struct.unpack('>I4', h, 13)
local floor = string.sub(h, 1, 8)
if n > cap then
  local o = 16 + (n - cap - 1) * 8
  local t = redis.call('GETRANGE', k, o, o + 7)
  if gt(t, floor) then floor = t end
end
if not gt(key, floor) then return 0 end
local last = nil
if n > 0 then last = redis.call('GETRANGE', k, 16 + (n - 1) * 8, 16 + n * 8 - 1) end
local v, entries
if last == nil or gt(key, last) then
  local slots = (redis.call('STRLEN', k) - 16) / 8
  if n < slots then
    redis.call('SETRANGE', k, 16 + n * 8, key)
    redis.call('SETRANGE', k, 12, struct.pack('>I4', n + 1))
    return 1
  end
  v = redis.call('GET', k)
  entries = string.sub(v, 17, 16 + n * 8) .. key
else
  v = redis.call('GET', k)
  local lo, hi = 0, n - 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if gt(key, entry(v, 16, mid)) then lo = mid + 1 else hi = mid end
  end
  if entry(v, 16, lo) == key then return 0 end
  entries = string.sub(v, 17, 16 + lo * 8) .. key .. string.sub(v, 17 + lo * 8, 16 + n * 8)
end
write(k, string.sub(v, 1, 8), string.sub(v, 9, 9), entries, n + 1, cap, slack)
return 1
";

/// KEYS[1] inbox; ARGV: floor (8 bytes), keys (packed, ascending), cap,
/// slack, mode (`f`: finish a rebuild, creating the inbox if absent and
/// marking it ready; `m`: merge into a present inbox, keeping its state).
/// Raises the floor, then keeps the union of held and given keys above it.
const MERGE: &str = r"
local k = KEYS[1]
local cap, slack, mode = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local v = redis.call('GET', k)
local floor, state, n, base
if not v then
  if mode == 'm' then return 0 end
  v, floor, state, n, base = '', string.rep('\0', 8), 'R', 0, 0
else
  floor, state, n, base = string.sub(v, 1, 8), string.sub(v, 9, 9), struct.unpack('>I4', v, 13), 16
end
if mode == 'f' then state = 'R' end
floor = effective_floor(floor, v, base, n, cap)
if gt(ARGV[1], floor) then floor = ARGV[1] end
local b = ARGV[2]
local nb = #b / 8
local out, i, j, last = {}, 0, 0, nil
while i < n or j < nb do
  local ea, eb, x
  if i < n then ea = entry(v, base, i) end
  if j < nb then eb = entry(b, 0, j) end
  if ea and (not eb or not gt(ea, eb)) then x = ea; i = i + 1 else x = eb; j = j + 1 end
  if x ~= last and gt(x, floor) then out[#out + 1] = x; last = x end
end
write(k, floor, state, table.concat(out), #out, cap, slack)
return 1
";

/// KEYS[1] a hot-author hash; ARGV: author field, key (8 bytes). Keeps the
/// newest key per author.
const MARK: &str = r"
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if (not cur) or gt(ARGV[2], cur) then redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) end
return 0
";

/// The scripts, loaded once per connection (and again after a server lost
/// its script cache).
pub(crate) struct Scripts {
    pub deliver: redis::Script,
    pub merge: redis::Script,
    pub mark: redis::Script,
}

impl Scripts {
    pub fn new() -> Self {
        let with_prelude = |body: &str| redis::Script::new(&format!("{PRELUDE}{body}"));
        Self { deliver: with_prelude(DELIVER), merge: with_prelude(MERGE), mark: with_prelude(MARK) }
    }

    pub fn all(&self) -> [&redis::Script; 3] {
        [&self.deliver, &self.merge, &self.mark]
    }
}
