-- PS-ACQ: take permits of a permit-expirable semaphore, each under its own id, after giving
--! keys=3 argv=*
-- back expired ones (sync protocol §3.1-3.2).
-- KEYS[1] = semaphore N, KEYS[2] = sorted set {N}:timeout, KEYS[3] = channel redisson_sc:{N}
-- ARGV[1] = permits wanted n, ARGV[2] = expiry deadline (epoch ms, or the no-lease sentinel),
-- ARGV[3] = now (epoch ms), ARGV[4] = the no-lease sentinel 922337203685477,
-- ARGV[5] = publish command, ARGV[6..] = the n permit ids (16 raw bytes each)
-- Reply: 'OK' taken; ':<score>' not taken, the earliest permit expires then; nil not taken and
-- nothing will expire.
check_notify(ARGV[5], KEYS[3])
local wanted = tonumber(ARGV[1])
local expired = redis.call('zrangebyscore', KEYS[2], 0, ARGV[3], 'limit', 0, wanted)
if #expired > 0 then
  for _, id in ipairs(expired) do
    redis.call('zrem', KEYS[2], id)
  end
  local now_available = redis.call('incrby', KEYS[1], #expired)
  if now_available > 0 then
    notify(ARGV[5], KEYS[3], now_available)
  end
end
local available = redis.call('get', KEYS[1])
if available ~= false and tonumber(available) >= wanted then
  redis.call('decrby', KEYS[1], wanted)
  for i = 6, #ARGV do
    redis.call('zadd', KEYS[2], ARGV[2], ARGV[i])
  end
  local ttl = redis.call('pttl', KEYS[1])
  if ttl > 0 then
    redis.call('pexpire', KEYS[2], ttl)
  end
  return 'OK'
end
local earliest = redis.call('zrange', KEYS[2], 0, 0, 'withscores')
if earliest[2] ~= nil and earliest[2] ~= ARGV[4] then
  return ':' .. earliest[2]
end
return nil
