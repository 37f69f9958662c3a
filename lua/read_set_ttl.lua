-- R-SET: an owner-checked set of a reader's TTL to an exact value, R-RENEW's keys and
--! keys=* argv=*
-- arguments (a RedLock's extension or a multi-lock part on a read lock).
-- KEYS = [N1, P1, ...] as R-RENEW; ARGV = [ms, m1, R1_1 .. R1_m1, ...] as R-RENEW.
-- For each lock: every listed reader still present gets its timeout keys set to exactly ms.
-- The hash lives as long as its longest hold: in read mode its TTL becomes the longest of ms
-- and the other readers' timeout keys; in write mode (a writer, whose hold has no timeout key,
-- shares the hash) it is only raised. Flag 1 if a listed reader was present, else 0 (nothing
-- changed). Reply: the flags, one per lock.
local flags = {}
local lease = tonumber(ARGV[1])
local a = 2
for i = 1, #KEYS, 2 do
  local lock = KEYS[i]
  local prefix = KEYS[i + 1]
  local readers = tonumber(ARGV[a])
  a = a + 1
  local mine = {}
  local alive = false
  for _ = 1, readers do
    local reader = ARGV[a]
    a = a + 1
    local count = redis.pcall('hget', lock, reader)
    if type(count) == 'string' and tonumber(count) then
      alive = true
      mine[reader] = true
      for k = tonumber(count), 1, -1 do
        redis.call('pexpire', prefix .. ':' .. reader .. ':rwlock_timeout:' .. k, ARGV[1])
      end
    end
  end
  if alive then
    local ttl = lease
    if redis.call('hget', lock, 'mode') == 'write' then
      ttl = math.max(ttl, redis.call('pttl', lock))
    else
      for _, field in ipairs(redis.call('hkeys', lock)) do
        local holds = tonumber(redis.call('hget', lock, field))
        if holds and not mine[field] then
          for k = holds, 1, -1 do
            ttl = math.max(ttl, redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. k))
          end
        end
      end
    end
    -- A TTL read back is a Lua number: written as an integer (a huge one would print as a float).
    redis.call('pexpire', lock, string.format('%d', ttl))
    flags[#flags + 1] = 1
  else
    flags[#flags + 1] = 0
  end
end
return flags
