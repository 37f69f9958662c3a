-- F-ACQ: fair lock, acquire or join the queue (protocol §7.3).
--! keys=3 argv=4
-- KEYS = [N, redisson_lock_queue:{N}, redisson_lock_timeout:{N}]
-- ARGV = [lease ms, owner field, wait ms, now (epoch ms)]   (note: wait before now)
-- Reply: nil = acquired; otherwise the TTL bound for the waiter's next sleep.
-- purge(), take_if_free() and join_queue() come from fair_common.lua, prepended by the
-- registry.

local lock, queue, timeouts, field = KEYS[1], KEYS[2], KEYS[3], ARGV[2]
local wait, now = tonumber(ARGV[3]), tonumber(ARGV[4])
purge(queue, timeouts, now)
if take_if_free(lock, queue, timeouts, field, ARGV[1], wait) then
  return nil
end
return join_queue(lock, queue, timeouts, field, wait, now)
