-- SEM-SET / SEM-SET-TTL / PS-SET: set the permits of a semaphore that does not exist yet
--! keys=2 argv=3
-- (sync protocol §2.2, §3.2).
-- KEYS[1] = semaphore N, KEYS[2] = channel redisson_sc:{N}
-- ARGV[1] = permits, ARGV[2] = publish command, ARGV[3] = time to live in ms (0: none)
-- Reply: 1 set (and the permits announced), 0 N existed (nothing changed).
check_notify(ARGV[2], KEYS[2])
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
if tonumber(ARGV[3]) > 0 then
  redis.call('set', KEYS[1], ARGV[1], 'px', ARGV[3])
else
  redis.call('set', KEYS[1], ARGV[1])
end
notify(ARGV[2], KEYS[2], ARGV[1])
return 1
