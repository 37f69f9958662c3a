-- Election view (this crate's, no Redisson counterpart): who holds the fenced lock N, its term
--! keys=3 argv=0
-- and the value its holder proclaimed. Reads the lock as Redisson writes it, so a Java
-- RFencedLock holder is seen like a Rust one; the proclamation key is this crate's own.
-- KEYS[1] = lock hash N, KEYS[2] = redisson_lock_token:{N}, KEYS[3] = redisson_lock_leader:{N}
-- Reply: {holder field ('' when free), PTTL of N, token counter ('0' when absent), value or nil}.
-- A proclamation whose holder does not hold N now is stale and is deleted here.
local holder = ''
if redis.call('type', KEYS[1]).ok == 'hash' then
  for _, field in ipairs(redis.call('hkeys', KEYS[1])) do
    if field ~= 'mode' then
      holder = field
      break
    end
  end
end
local token = redis.call('get', KEYS[2])
if not token then
  token = '0'
end
local value = false
if redis.call('type', KEYS[3]).ok == 'hash' then
  local owner = redis.call('hget', KEYS[3], 'holder')
  if holder ~= '' and owner == holder then
    value = redis.call('hget', KEYS[3], 'value')
  else
    redis.call('del', KEYS[3])
  end
end
return {holder, redis.call('pttl', KEYS[1]), token, value}
