-- F-TRY: fair lock, one attempt without joining the queue (protocol §7.2).
--! keys=3 argv=4
-- KEYS = [N, redisson_lock_queue:{N}, redisson_lock_timeout:{N}]
-- ARGV = [lease ms, owner field, now (epoch ms), wait ms]   (note: now before wait)
-- Reply: nil = acquired (fresh or re-entry), 1 = not acquired (and not enqueued).
-- purge() and take_if_free() come from fair_common.lua, prepended by the registry.

purge(KEYS[2], KEYS[3], tonumber(ARGV[3]))
if take_if_free(KEYS[1], KEYS[2], KEYS[3], ARGV[2], ARGV[1], tonumber(ARGV[4])) then
  return nil
end
return 1
