-- G-RENEW: batched watchdog renewal of group multi-locks (sync protocol §6.2).
--! keys=* argv=*
-- KEYS[i] = group hash Gi
-- ARGV = [watchdog ms, then per group: owner field Fi, now (epoch ms), ni, Hi_1 .. Hi_ni]
-- For each group: if Fi still owns every listed value, each value's expire_time is raised to
-- now + watchdog ms and the hash's TTL to watchdog ms (never lowered): flag 1; otherwise
-- nothing changes: flag 0. Reply: the flags, one per group.
local lease = tonumber(ARGV[1])
local flags = {}
local a = 2
for i = 1, #KEYS do
  local group = KEYS[i]
  local field, now, n = ARGV[a], tonumber(ARGV[a + 1]), tonumber(ARGV[a + 2])
  local first = a + 3
  a = first + n
  local owned = redis.pcall('exists', group) == 1
  for j = first, first + n - 1 do
    if not owned then break end
    owned = redis.pcall('hget', group, ARGV[j]) == field
  end
  if owned then
    for j = first, first + n - 1 do
      local expire_field = ARGV[j] .. ':' .. field .. ':expire_time'
      local ends = tonumber(redis.call('hget', group, expire_field))
      if not ends or ends < now + lease then
        redis.call('hset', group, expire_field, now + lease)
      end
    end
    if redis.call('pttl', group) < lease then
      redis.call('pexpire', group, lease)
    end
    flags[i] = 1
  else
    flags[i] = 0
  end
end
return flags
