-- L-RENEW: batched watchdog renewal (protocol §5.2).
--! keys=* argv=*
-- KEYS[i] = lock hash Ni; ARGV[1] = watchdog timeout in ms; ARGV[i + 1] = owner field Fi of Ni.
-- Reply: one integer per key, 1 = Fi still holds Ni and its TTL is at least the timeout now,
-- 0 = not held. A key of another type counts as "not held" instead of aborting the whole batch.
-- The TTL is only ever raised (Redisson sets it to the timeout): a longer TTL is another hold's
-- on the same key (a leased part of this owner, a leased reader beside a writer, a run-once
-- job's at_least), and a renewal that lowered it would make that hold end before its holder
-- is told. An owner-checked set to an exact TTL is L-SET (lock_set_ttl.lua).
local renewed = {}
local lease = tonumber(ARGV[1])
for i = 1, #KEYS do
  local present = redis.pcall('hexists', KEYS[i], ARGV[i + 1])
  if present == 1 then
    if redis.call('pttl', KEYS[i]) < lease then
      redis.call('pexpire', KEYS[i], ARGV[1])
    end
    renewed[i] = 1
  else
    renewed[i] = 0
  end
end
return renewed
