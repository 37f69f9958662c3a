-- NRF-TRY: non-reentrant fair lock, one attempt without joining the queue (sync protocol §5.2).
--! keys=3 argv=5
-- KEYS = [N, redisson_lock_queue:{N}, redisson_lock_timeout:{N}]
-- ARGV = [lease ms, owner field, now (epoch ms), wait ms, "NON_REENTRANT_REACQUIRE"]
-- Reply: nil = acquired, 1 = not acquired (and not enqueued); an error reply carrying the
-- marker when the caller already holds the lock (checked before any queue change).
-- purge() and take_if_free() come from fair_common.lua, prepended by the registry.

purge(KEYS[2], KEYS[3], tonumber(ARGV[3]))
-- The holder's key exists, so the free-lock branch cannot apply to it: the re-entry check
-- may come first and leaves the queue and the scores as they are.
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  return redis.error_reply(ARGV[5])
end
if take_if_free(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[1], tonumber(ARGV[4])) then
  return nil
end
return 1
