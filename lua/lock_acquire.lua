-- L-ACQ: acquire or re-enter a reentrant lock (protocol §4.2).
--! keys=1 argv=2
-- KEYS[1] = lock hash N
-- ARGV[1] = lease in ms, ARGV[2] = owner field "<uuid>:<owner id>"
-- Reply: nil when acquired (fresh or re-entry), otherwise the PTTL of N.
local held_by_caller = redis.call('hexists', KEYS[1], ARGV[2]) == 1
if held_by_caller or redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
return redis.call('pttl', KEYS[1])
