-- PS-AVAIL: the available permits of a permit-expirable semaphore, after giving back every
--! keys=3 argv=2
-- expired permit (sync protocol §3.2).
-- KEYS[1] = semaphore N, KEYS[2] = sorted set {N}:timeout, KEYS[3] = channel redisson_sc:{N}
-- ARGV[1] = now (epoch ms), ARGV[2] = publish command
-- Reply: the available permits (0 when N is absent and nothing expired).
check_notify(ARGV[2], KEYS[3])
local expired = redis.call('zremrangebyscore', KEYS[2], 0, ARGV[1])
if expired > 0 then
  local now_available = redis.call('incrby', KEYS[1], expired)
  if now_available > 0 then
    notify(ARGV[2], KEYS[3], now_available)
  end
  return now_available
end
return tonumber(redis.call('get', KEYS[1]) or '0')
