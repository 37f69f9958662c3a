-- R-ACQ: acquire a read lock (protocol §8.2).
--! keys=2 argv=3
-- KEYS = [N, TP] with TP = {N}:<field>:rwlock_timeout (suffix rule); hold k has key TP:k.
-- ARGV = [lease ms, reader field <uuid>:<id>, that owner's write field <uuid>:<id>:write]
-- Reply: nil = acquired, otherwise the PTTL of N.
local lock, prefix, lease = KEYS[1], KEYS[2], tonumber(ARGV[1])
local mode = redis.call('hget', lock, 'mode')
if not mode then
  redis.call('hset', lock, 'mode', 'read')
  redis.call('hset', lock, ARGV[2], 1)
  redis.call('set', prefix .. ':1', 1)
  redis.call('pexpire', prefix .. ':1', lease)
  redis.call('pexpire', lock, lease)
  return nil
end
if mode == 'read' or (mode == 'write' and redis.call('hexists', lock, ARGV[3]) == 1) then
  local k = redis.call('hincrby', lock, ARGV[2], 1)
  local hold = prefix .. ':' .. k
  redis.call('set', hold, 1)
  redis.call('pexpire', hold, lease)
  redis.call('pexpire', lock, math.max(redis.call('pttl', lock), lease))
  return nil
end
return redis.call('pttl', lock)
