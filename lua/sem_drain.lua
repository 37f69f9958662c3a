-- SEM-DRAIN: take every available permit of a semaphore (sync protocol §2.2).
--! keys=1 argv=0
-- KEYS[1] = semaphore N
-- Sets N to 0 (dropping its TTL) when it exists; publishes nothing.
-- Reply: the permits taken (what N held; 0 when absent).
local available = redis.call('get', KEYS[1])
if available == false then
  return 0
end
redis.call('set', KEYS[1], 0)
return tonumber(available)
