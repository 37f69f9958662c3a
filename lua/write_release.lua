-- W-REL: release one write hold (protocol §8.5). The last write hold wakes every waiter with
--! keys=3 argv=5
-- message 1, unless the owner still reads (downgrade: mode becomes read, no message).
-- KEYS = [N, redisson_rwlock:{N}, latch]
-- ARGV = ["1", lease ms, write field, publish command, latch PX ms]
-- Reply: nil = not held, 0 = still held, 1 = released.
check_notify(ARGV[4], KEYS[2])
local lock, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local earlier = redis.call('get', latch)
if earlier then
  return tonumber(earlier)
end
local mode = redis.call('hget', lock, 'mode')
if not mode then
  notify(ARGV[4], channel, ARGV[1])
  redis.call('set', latch, '1', 'px', ARGV[5])
  return nil
end
if mode ~= 'write' or redis.call('hexists', lock, ARGV[3]) == 0 then
  return nil
end
local left = redis.call('hincrby', lock, ARGV[3], -1)
if left > 0 then
  redis.call('pexpire', lock, ARGV[2])
  redis.call('set', latch, '0', 'px', ARGV[5])
  return 0
end
redis.call('hdel', lock, ARGV[3])
if redis.call('hlen', lock) == 1 then
  redis.call('del', lock)
  notify(ARGV[4], channel, ARGV[1])
else
  redis.call('hset', lock, 'mode', 'read')
end
redis.call('set', latch, '1', 'px', ARGV[5])
return 1
