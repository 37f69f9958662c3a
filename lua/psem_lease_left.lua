-- PS-GETLEASE: what is left of one permit's lease, after giving back every expired permit
--! keys=3 argv=4
-- (sync protocol §3.2, Java's getLeaseTime(permitId)).
-- KEYS[1] = semaphore N, KEYS[2] = sorted set {N}:timeout, KEYS[3] = channel redisson_sc:{N}
-- ARGV[1] = permit id (16 raw bytes), ARGV[2] = the no-lease sentinel 922337203685477,
-- ARGV[3] = now (epoch ms), ARGV[4] = publish command
-- Reply: the ms left (> 0: the permit is live); -1 a permit without lease; 0 no such permit.
check_notify(ARGV[4], KEYS[3])
local expired = redis.call('zremrangebyscore', KEYS[2], 0, ARGV[3])
if expired > 0 then
  local now_available = redis.call('incrby', KEYS[1], expired)
  if now_available > 0 then
    notify(ARGV[4], KEYS[3], now_available)
  end
end
local score = redis.call('zscore', KEYS[2], ARGV[1])
if not score then
  return 0
end
if score == ARGV[2] then
  return -1
end
return tonumber(score) - tonumber(ARGV[3])
