-- F-ACQ: fair lock, acquire or join the queue (protocol §7.3).
--! keys=3 argv=4
-- KEYS = [N, redisson_lock_queue:{N}, redisson_lock_timeout:{N}]
-- ARGV = [lease ms, owner field, wait ms, now (epoch ms)]   (note: wait before now)
-- Reply: nil = acquired; otherwise the TTL bound for the waiter's next sleep.
-- purge() and take_if_free() come from fair_common.lua, prepended by the registry.

local lock, queue, timeouts, field = KEYS[1], KEYS[2], KEYS[3], ARGV[2]
local wait, now = tonumber(ARGV[3]), tonumber(ARGV[4])
purge(queue, timeouts, now)
if take_if_free(lock, queue, timeouts, field, ARGV[1], wait) then
  return nil
end
-- Already queued: sleep at most the lock's remaining TTL.
if redis.call('zscore', timeouts, field) then
  return math.max(0, redis.call('pttl', lock))
end
-- Join the queue behind the last waiter (or the holder).
local ttl
local last = redis.call('lindex', queue, -1)
local last_deadline = last and last ~= field and redis.call('zscore', timeouts, last)
if last_deadline then
  ttl = tonumber(last_deadline) - now
else
  ttl = redis.call('pttl', lock)
end
if redis.call('zadd', timeouts, ttl + wait + now, field) == 1 then
  redis.call('rpush', queue, field)
end
return ttl
