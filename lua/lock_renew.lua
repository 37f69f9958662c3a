-- L-RENEW: batched watchdog renewal (protocol §5.2).
--! keys=* argv=*
-- KEYS[i] = lock hash Ni; ARGV[1] = watchdog timeout in ms; ARGV[i + 1] = owner field Fi of Ni.
-- Reply: one integer per key, 1 = Fi still holds Ni and its TTL was re-armed, 0 = not held.
-- A key of another type counts as "not held" instead of aborting the whole batch.
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
