-- NRF-ACQ: non-reentrant fair lock, acquire or join the queue (sync protocol §5.2).
--! keys=3 argv=5
-- KEYS = [N, redisson_lock_queue:{N}, redisson_lock_timeout:{N}]
-- ARGV = [lease ms, owner field, wait ms, now (epoch ms), "NON_REENTRANT_REACQUIRE"]
-- Reply: as F-ACQ (nil = acquired, otherwise the TTL bound for the next sleep); an error reply
-- carrying the marker when the caller already holds the lock: never enqueued, no score moved.
-- purge(), take_if_free() and join_queue() come from fair_common.lua.

local lock, queue, timeouts, field = KEYS[1], KEYS[2], KEYS[3], ARGV[2]
local wait, now = tonumber(ARGV[3]), tonumber(ARGV[4])
purge(queue, timeouts, now)
if redis.call('hexists', lock, field) == 1 then
  return redis.error_reply(ARGV[5])
end
if take_if_free(lock, queue, timeouts, field, ARGV[1], wait) then
  return nil
end
return join_queue(lock, queue, timeouts, field, wait, now)
