-- SEM-REL: give permits back to a semaphore and announce the new count (sync protocol §2.2).
--! keys=2 argv=2
-- KEYS[1] = semaphore N, KEYS[2] = channel redisson_sc:{N}
-- ARGV[1] = permits given back (> 0), ARGV[2] = publish command
-- Creates N when absent and keeps its TTL; publishes the permits now available.
-- Reply: the permits now available.
check_notify(ARGV[2], KEYS[2])
local now_available = redis.call('incrby', KEYS[1], ARGV[1])
notify(ARGV[2], KEYS[2], now_available)
return now_available
