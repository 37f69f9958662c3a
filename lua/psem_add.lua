-- PS-ADD: add (or with a negative amount remove) permits of a permit-expirable semaphore
--! keys=2 argv=2
-- (sync protocol §3.2).
-- KEYS[1] = semaphore N, KEYS[2] = channel redisson_sc:{N}
-- ARGV[1] = amount (may be negative), ARGV[2] = publish command
-- Writes the new count (dropping any TTL); publishes the amount added, only when positive.
-- Reply: the new count.
check_notify(ARGV[2], KEYS[2])
local count = tonumber(redis.call('get', KEYS[1]) or '0') + tonumber(ARGV[1])
redis.call('set', KEYS[1], count)
if tonumber(ARGV[1]) > 0 then
  notify(ARGV[2], KEYS[2], ARGV[1])
end
return count
