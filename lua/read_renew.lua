-- R-RENEW: batched renewal of read locks (protocol §5.2, 4.4+ form).
--! keys=* argv=*
-- KEYS = [N1, P1, N2, P2, ...]: lock hash Ni and its key prefix Pi ({Ni} or Ni if it has '{'),
--        Pi given only for slot routing.
-- ARGV = [watchdog ms, m1, R1_1 .. R1_m1, m2, ...]: mi of this client's reader fields on Ni.
-- For each lock: every listed reader still present gets its timeout keys
-- Pi:R:rwlock_timeout:k (k = count .. 1) re-armed; if any reader was present the hash is
-- re-armed too and the lock's flag is 1, otherwise 0. Reply: the flags, one per lock.
local flags = {}
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
        redis.call('pexpire', prefix .. ':' .. reader .. ':rwlock_timeout:' .. k, ARGV[1])
      end
    end
  end
  if alive then
    redis.call('pexpire', lock, ARGV[1])
    flags[#flags + 1] = 1
  else
    flags[#flags + 1] = 0
  end
end
return flags
