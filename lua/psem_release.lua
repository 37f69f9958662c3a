-- PS-REL: give back one permit of a permit-expirable semaphore by its id (sync protocol §3.2).
--! keys=3 argv=4
-- KEYS[1] = semaphore N, KEYS[2] = channel redisson_sc:{N}, KEYS[3] = sorted set {N}:timeout
-- ARGV[1] = permit id (16 raw bytes), ARGV[2] = 1 (permits per id), ARGV[3] = now (epoch ms),
-- ARGV[4] = publish command
-- Reply: 1 given back; 0 unknown id (nothing changed) or an expired permit (given back too).
check_notify(ARGV[4], KEYS[2])
local expires = redis.call('zscore', KEYS[3], ARGV[1])
if redis.call('zrem', KEYS[3], ARGV[1]) == 0 then
  return 0
end
local now_available = redis.call('incrby', KEYS[1], ARGV[2])
notify(ARGV[4], KEYS[2], now_available)
if tonumber(expires) <= tonumber(ARGV[3]) then
  return 0
end
return 1
