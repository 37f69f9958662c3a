-- L-ACQ: acquire or re-enter a reentrant lock (protocol §4.2).
--! keys=1 argv=2
-- KEYS[1] = lock hash N
-- ARGV[1] = lease in ms, ARGV[2] = owner field "<uuid>:<owner id>"
-- Reply: nil when acquired (fresh or re-entry), otherwise the PTTL of N.
-- A fresh acquisition (N absent, the common case) costs three commands: EXISTS, HINCRBY,
-- PEXPIRE. A re-entry never lowers the TTL (the owner's hold lives as long as its longest
-- part: a shorter lease taken on top of a longer one does not cut the longer one short).
local fresh = redis.call('exists', KEYS[1]) == 0
if fresh or redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  if fresh or redis.call('pttl', KEYS[1]) < tonumber(ARGV[1]) then
    redis.call('pexpire', KEYS[1], ARGV[1])
  end
  return nil
end
return redis.call('pttl', KEYS[1])
