-- L-SET: an owner-checked set of a lock's TTL to an exact value, L-RENEW's keys and arguments
--! keys=* argv=*
-- (a RedLock's extension, a multi-lock part set to its lease, a run-once job kept until its
-- at_least). KEYS[i] = lock hash Ni; ARGV[1] = the TTL in ms; ARGV[i + 1] = owner field Fi.
-- Reply: one integer per key, 1 = Fi holds Ni and its TTL is now ARGV[1], 0 = not held
-- (nothing changed). A key of another type counts as "not held".
local renewed = {}
for i = 1, #KEYS do
  local present = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
  if present == 1 then
    redis.call('pexpire', KEYS[i], ARGV[1])
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
