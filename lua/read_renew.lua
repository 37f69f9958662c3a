-- R-RENEW: batched renewal of read locks (protocol §5.2, 4.4+ form).
--! keys=* argv=*
-- KEYS = [N1, P1, N2, P2, ...]: lock hash Ni and its key prefix Pi ({Ni} or Ni if it has '{'),
--        Pi given only for slot routing.
-- ARGV = [watchdog ms, m1, R1_1 .. R1_m1, m2, ...]: mi of this client's reader fields on Ni.
-- For each lock: every listed reader still present gets its timeout keys
-- Pi:R:rwlock_timeout:k (k = count .. 1) raised to the watchdog timeout; if any reader was
-- present the hash is raised too and the lock's flag is 1, otherwise 0. Reply: the flags, one
-- per lock. TTLs are only ever raised (Redisson sets them to the timeout): a longer one belongs
-- to a leased read hold (this owner's, or another reader's), which a renewal must not cut short.
-- An owner-checked set to an exact TTL is R-SET (read_set_ttl.lua).
local flags = {}
local lease = tonumber(ARGV[1])
local function raise(key)
  if redis.call('pttl', key) < lease then
    redis.call('pexpire', key, ARGV[1])
  end
end
local a = 2
for i = 1, #KEYS, 2 do
  local lock = KEYS[i]
  local prefix = KEYS[i + 1]
  local readers = tonumber(ARGV[a])
  a = a + 1
  local alive = false
  for _ = 1, readers do
    local reader = ARGV[a]
    a = a + 1
    local count = redis.pcall('hget', lock, reader)
    if type(count) == 'string' and tonumber(count) then
      alive = true
      for k = tonumber(count), 1, -1 do
        raise(prefix .. ':' .. reader .. ':rwlock_timeout:' .. k)
      end
    end
  end
  if alive then
    raise(lock)
    flags[#flags + 1] = 1
  else
    flags[#flags + 1] = 0
  end
end
return flags
