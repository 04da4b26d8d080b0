//! The Lua scripts that change inboxes atomically on the Redis node that
//! holds them.
//!
//! An inbox is one Redis string (see the crate docs for the layout): a
//! 24-byte header (floor, slots and state, count, newest key) then `slots`
//! 8-byte big-endian keys, the first `count` of them used, ascending. Keys are
//! compared as two unsigned 32-bit halves, high first (each exact in a
//! double; two C calls where comparing byte by byte took up to sixteen):
//! Lua's numbers are doubles and cannot hold a 64-bit key, and its string
//! `<` follows the server's locale.

/// Shared helpers. `gt(a, b)`: 8-byte key `a` above `b`. `write`: stores an
/// inbox, trimming it to `cap` once it holds more than `cap + slack` keys
/// (the floor rises to the newest key trimmed) and leaving free slots so
/// that most deliveries write in place.
const PRELUDE: &str = r"
local BUILDING = 2147483648
local TAIL = 32
local function gt(a, b)
  local ah, al = struct.unpack('>I4I4', a)
  local bh, bl = struct.unpack('>I4I4', b)
  if ah ~= bh then return ah > bh end
  return al > bl
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
local function write(k, floor, building, entries, n, cap, slack)
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
  local last = string.rep('\0', 8)
  if n > 0 then last = entry(entries, 0, n - 1) end
  local flags = slots
  if building then flags = flags + BUILDING end
  redis.call('SET', k, floor .. struct.pack('>I4I4', flags, n) .. last .. entries .. string.rep('\0', (slots - n) * 8))
end
";

/// `deliver1(k, key, cap, slack)`: delivers one key (8 bytes) to inbox `k`;
/// 1 when it took the key (present, above the floor, not held yet), else 0.
const DELIVER_ONE: &str = r"
local function deliver1(k, key, cap, slack)
  local took = 0
  local h = redis.call('GETRANGE', k, 0, 23)
  if #h == 24 then
    local flags, n = struct.unpack('>I4I4', h, 9)
    local slots, building = flags % BUILDING, flags >= BUILDING
    if n == 0 or gt(key, string.sub(h, 17, 24)) then
      -- Above every key held (so above the floor), or into an empty inbox.
      if n > 0 or gt(key, string.sub(h, 1, 8)) then
        if n < slots then
          redis.call('SETRANGE', k, 24 + n * 8, key)
          redis.call('SETRANGE', k, 12, struct.pack('>I4', n + 1) .. key)
        else
          local v = redis.call('GET', k)
          write(k, string.sub(v, 1, 8), building, string.sub(v, 25, 24 + n * 8) .. key, n + 1, cap, slack)
        end
        took = 1
      end
    else
      -- Below the newest key held. Posts fanned out side by side arrive a
      -- little out of order: a key among the last TAIL held goes in place
      -- (with a free slot), moving only the keys after it, where the whole
      -- inbox was read, rebuilt and written (30 us a delivery).
      local placed = false
      if n < slots then
        local m = math.max(0, n - TAIL)
        local t = redis.call('GETRANGE', k, 24 + m * 8, 23 + n * 8)
        -- the held key the new one must be above: the lowest read, or the
        -- newest beyond the cap (the effective floor)
        local j = m
        if n > cap and n - cap - 1 > j then j = n - cap - 1 end
        if gt(key, entry(t, 0, j - m)) and gt(key, string.sub(h, 1, 8)) then
          -- the first held key at or above the new one, in (j, n)
          local lo, hi = j + 1, n - 1
          while lo < hi do
            local mid = math.floor((lo + hi) / 2)
            if gt(key, entry(t, 0, mid - m)) then lo = mid + 1 else hi = mid end
          end
          if entry(t, 0, lo - m) ~= key then
            redis.call('SETRANGE', k, 24 + lo * 8, key .. string.sub(t, (lo - m) * 8 + 1))
            redis.call('SETRANGE', k, 12, struct.pack('>I4', n + 1))
            took = 1
          end
          placed = true
        end
      end
      if not placed then
        local v = redis.call('GET', k)
        if gt(key, effective_floor(string.sub(v, 1, 8), v, 24, n, cap)) then
          local lo, hi = 0, n - 1
          while lo < hi do
            local mid = math.floor((lo + hi) / 2)
            if gt(key, entry(v, 24, mid)) then lo = mid + 1 else hi = mid end
          end
          if entry(v, 24, lo) ~= key then
            local entries = string.sub(v, 25, 24 + lo * 8) .. key .. string.sub(v, 25 + lo * 8, 24 + n * 8)
            write(k, string.sub(v, 1, 8), building, entries, n + 1, cap, slack)
            took = 1
          end
        end
      end
    end
  end
  return took
end
";

/// ARGV: cap, slack, then pairs of an inbox key and its keys (8 bytes each,
/// packed, ascending, distinct): deliveries grouped by inbox (a fan-out
/// step's, or one key to a chunk of followers). The inbox keys are not
/// declared: the caller sends one call per node with the inboxes that node
/// serves. With room for them all, keys
/// above the newest held (or above the floor of an empty inbox) go in as
/// one block, and keys that reach below it no further than the last `TAIL`
/// held are merged with the keys after them (those held already are not
/// taken): one read of the header, one of the tail, two writes for the lot.
/// Otherwise each key goes by itself (`deliver1`). Returns how many keys
/// inboxes took.
const DELIVER: &str = r"
local cap, slack = tonumber(ARGV[1]), tonumber(ARGV[2])
local took = 0
for i = 3, #ARGV, 2 do
  local k, ks = ARGV[i], ARGV[i + 1]
  local m = #ks / 8
  local h = redis.call('GETRANGE', k, 0, 23)
  if #h == 24 then
    local flags, n = struct.unpack('>I4I4', h, 9)
    local slots = flags % BUILDING
    local first, last, newest = string.sub(ks, 1, 8), string.sub(ks, -8), string.sub(h, 17, 24)
    local done = false
    if n + m <= slots then
      if (n == 0 and gt(first, string.sub(h, 1, 8))) or (n > 0 and gt(first, newest)) then
        redis.call('SETRANGE', k, 24 + n * 8, ks)
        redis.call('SETRANGE', k, 12, struct.pack('>I4', n + m) .. last)
        took = took + m
        done = true
      elseif n > 0 then
        local low = math.max(0, n - TAIL)
        local t = redis.call('GETRANGE', k, 24 + low * 8, 23 + n * 8)
        -- the held key the first must be above: the lowest read, or the
        -- newest beyond the cap (the effective floor)
        local j = low
        if n > cap and n - cap - 1 > j then j = n - cap - 1 end
        if gt(first, entry(t, 0, j - low)) and gt(first, string.sub(h, 1, 8)) then
          -- the first held key at or above the first new one, in (j, n)
          local lo, hi = j + 1, n - 1
          while lo < hi do
            local mid = math.floor((lo + hi) / 2)
            if gt(first, entry(t, 0, mid - low)) then lo = mid + 1 else hi = mid end
          end
          local out, a, b, added = {}, lo, 0, 0
          while a < n or b < m do
            local ea, eb
            if a < n then ea = entry(t, 0, a - low) end
            if b < m then eb = entry(ks, 0, b) end
            if ea and (not eb or gt(eb, ea)) then
              out[#out + 1] = ea
              a = a + 1
            elseif ea and ea == eb then
              out[#out + 1] = ea
              a, b = a + 1, b + 1
            else
              out[#out + 1] = eb
              b, added = b + 1, added + 1
            end
          end
          if gt(last, newest) then newest = last end
          redis.call('SETRANGE', k, 24 + lo * 8, table.concat(out))
          redis.call('SETRANGE', k, 12, struct.pack('>I4', n + added) .. newest)
          took = took + added
          done = true
        end
      end
    end
    if not done then
      for j = 0, m - 1 do
        took = took + deliver1(k, string.sub(ks, j * 8 + 1, j * 8 + 8), cap, slack)
      end
    end
  end
end
return took
";

/// KEYS[1] inbox; ARGV: floor (8 bytes), keys (packed, ascending), cap,
/// slack, mode (`f`: finish a rebuild, creating the inbox if absent and
/// marking it ready; `m`: merge into a present inbox, keeping its state).
/// Raises the floor, then keeps the union of held and given keys above it.
const MERGE: &str = r"
local k = KEYS[1]
local cap, slack, mode = tonumber(ARGV[3]), tonumber(ARGV[4]), ARGV[5]
local v = redis.call('GET', k)
local floor, building, n
if not v then
  if mode == 'm' then return 0 end
  v, floor, building, n = '', string.rep('\0', 8), false, 0
else
  local flags
  flags, n = struct.unpack('>I4I4', v, 9)
  floor, building = string.sub(v, 1, 8), flags >= BUILDING
  v = string.sub(v, 25, 24 + n * 8)
end
if mode == 'f' then building = false end
floor = effective_floor(floor, v, 0, n, cap)
if gt(ARGV[1], floor) then floor = ARGV[1] end
local b = ARGV[2]
local nb = #b / 8
local out, i, j, last = {}, 0, 0, nil
while i < n or j < nb do
  local ea, eb, x
  if i < n then ea = entry(v, 0, i) end
  if j < nb then eb = entry(b, 0, j) end
  if ea and (not eb or not gt(ea, eb)) then x = ea; i = i + 1 else x = eb; j = j + 1 end
  if x ~= last and gt(x, floor) then out[#out + 1] = x; last = x end
end
write(k, floor, building, table.concat(out), #out, cap, slack)
return 1
";

/// KEYS[1] a hot-author hash; ARGV: author field, key (8 bytes). Keeps the
/// newest key per author. An author's first mark is written with a ninth
/// byte (`n`: not yet announced) until the nodes were told the set of
/// marked authors grew (`ANNOUNCED`); returns 1 while that is so (the
/// caller then moves the set's generation), else 0.
const MARK: &str = r"
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local fresh = (not cur) or #cur > 8
if (not cur) or gt(ARGV[2], cur) then
  local v = ARGV[2]
  if fresh then v = v .. 'n' end
  redis.call('HSET', KEYS[1], ARGV[1], v)
end
if fresh then return 1 end
return 0
";

/// KEYS[1] a hot-author hash; ARGV: author field. The author's mark is
/// announced: its ninth byte dropped.
const ANNOUNCED: &str = r"
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur and #cur > 8 then redis.call('HSET', KEYS[1], ARGV[1], string.sub(cur, 1, 8)) end
return 0
";

/// Begins a change of an item's facts (`tokens.rs`): the token becomes
/// `d<n>`, `n` the changes in flight, lapsing `ARGV[1]` ms after the last
/// began.
const BEGIN_FACTS: &str = r"
local v = redis.call('GET', KEYS[1])
local n = 1
if v and string.sub(v, 1, 1) == 'd' then n = (tonumber(string.sub(v, 2)) or 0) + 1 end
redis.call('SET', KEYS[1], 'd' .. n, 'PX', ARGV[1])
return n
";

/// Ends a change of an item's facts: one change fewer in flight, and with
/// none left (or none known: it lapsed) the new token `ARGV[1]`, kept
/// `ARGV[2]` s.
const END_FACTS: &str = r"
local v = redis.call('GET', KEYS[1])
if v and string.sub(v, 1, 1) == 'd' then
  local n = tonumber(string.sub(v, 2)) or 1
  if n > 1 then
    redis.call('SET', KEYS[1], 'd' .. (n - 1), 'KEEPTTL')
    return n - 1
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
return 0
";

/// The scripts, loaded once per connection (and again after a server lost
/// its script cache).
pub(crate) struct Scripts {
    pub deliver: redis::Script,
    pub merge: redis::Script,
    pub mark: redis::Script,
    pub announced: redis::Script,
    pub begin_facts: redis::Script,
    pub end_facts: redis::Script,
    /// Each script's hash and text, for `EVAL` where a server lost them.
    texts: Vec<(String, String)>,
}

impl Scripts {
    pub fn new() -> Self {
        let deliver = format!("{DELIVER_ONE}{DELIVER}");
        let texts: Vec<(String, String)> = [deliver.as_str(), MERGE, MARK, ANNOUNCED, BEGIN_FACTS, END_FACTS]
            .iter()
            .map(|body| {
                let text = format!("{PRELUDE}{body}");
                (redis::Script::new(&text).get_hash().to_owned(), text)
            })
            .collect();
        let script = |i: usize| redis::Script::new(&texts[i].1);
        Self {
            deliver: script(0),
            merge: script(1),
            mark: script(2),
            announced: script(3),
            begin_facts: script(4),
            end_facts: script(5),
            texts,
        }
    }

    pub fn all(&self) -> [&redis::Script; 6] {
        [&self.deliver, &self.merge, &self.mark, &self.announced, &self.begin_facts, &self.end_facts]
    }

    /// `cmd` as an `EVAL` of the script's text when it is an `EVALSHA` of
    /// one of these scripts (run on a server that does not hold the script,
    /// it runs and the server keeps it); `None` for any other command.
    pub fn as_eval(&self, cmd: &redis::Cmd) -> Option<redis::Cmd> {
        let mut args = cmd.args_iter();
        let (Some(redis::Arg::Simple(name)), Some(redis::Arg::Simple(hash))) = (args.next(), args.next()) else {
            return None;
        };
        if !name.eq_ignore_ascii_case(b"EVALSHA") {
            return None;
        }
        let (_, text) = self.texts.iter().find(|(h, _)| h.as_bytes() == hash)?;
        let mut eval = redis::cmd("EVAL");
        eval.arg(text.as_str());
        for a in args {
            if let redis::Arg::Simple(a) = a {
                eval.arg(a);
            }
        }
        Some(eval)
    }
}
