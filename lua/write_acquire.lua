-- W-ACQ: acquire a write lock (protocol §8.4). Re-entry adds the lease to the remaining TTL.
--! keys=1 argv=2
-- KEYS = [N]; ARGV = [lease ms, write field <uuid>:<id>:write]
-- Reply: nil = acquired, otherwise the PTTL of N.
local lock, lease = KEYS[1], tonumber(ARGV[1])
local mode = redis.call('hget', lock, 'mode')
if not mode then
  redis.call('hset', lock, 'mode', 'write')
  redis.call('hset', lock, ARGV[2], 1)
  redis.call('pexpire', lock, lease)
  return nil
end
if mode == 'write' and redis.call('hexists', lock, ARGV[2]) == 1 then
  redis.call('hincrby', lock, ARGV[2], 1)
  redis.call('pexpire', lock, redis.call('pttl', lock) + lease)
  return nil
end
return redis.call('pttl', lock)
