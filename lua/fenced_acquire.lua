-- Fenced lock acquisition (protocol §9): L-ACQ plus INCR of the token counter on every success,
--! keys=2 argv=2
-- re-entries included. The reply is private to this crate and unambiguous even for a key
-- without TTL: {1, token} when acquired, {0, PTTL of N} when held by someone else.
-- KEYS[1] = lock hash N, KEYS[2] = redisson_lock_token:{N}
-- ARGV[1] = lease in ms, ARGV[2] = owner field
local fresh = redis.call('exists', KEYS[1]) == 0
if fresh or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  local token = redis.call('incr', KEYS[2])
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  -- A re-entry never lowers the TTL (as L-ACQ); a fresh hold has none to keep.
  if fresh or redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return {1, token}
end
return {0, redis.call('pttl', KEYS[1])}
