-- NR-ACQ: acquire a non-reentrant lock (sync protocol §5.1).
--! keys=1 argv=3
-- KEYS[1] = lock hash N
-- ARGV[1] = lease in ms, ARGV[2] = owner field "<uuid>:<owner id>",
-- ARGV[3] = the re-entry marker "NON_REENTRANT_REACQUIRE"
-- Reply: nil when acquired; an error reply carrying the marker when the caller already holds
-- the lock (nothing changes); otherwise the PTTL of N.
if redis.call('exists', KEYS[1]) == 0 then
  redis.call('hincrby', KEYS[1], ARGV[2], 1)
  redis.call('pexpire', KEYS[1], ARGV[1])
  return nil
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 1 then
  return redis.error_reply(ARGV[3])
end
return redis.call('pttl', KEYS[1])
