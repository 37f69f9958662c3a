-- Spin lock release (protocol §10): as L-REL, but it never publishes (spin waiters poll).
--! keys=2 argv=3
-- KEYS[1] = lock hash N, KEYS[2] = unlock latch of this request
-- ARGV[1] = lease in ms (re-armed on partial release), ARGV[2] = owner field,
-- ARGV[3] = latch PX in ms
-- Reply: nil = not the owner, 0 = still held, 1 = fully released.
local earlier = redis.call('get', KEYS[2])
if earlier then
  return tonumber(earlier)
end
if redis.call('hexists', KEYS[1], ARGV[2]) == 0 then
  return nil
end
local remaining = redis.call('hincrby', KEYS[1], ARGV[2], -1)
if remaining > 0 then
  redis.call('pexpire', KEYS[1], ARGV[1])
  redis.call('set', KEYS[2], '0', 'px', ARGV[3])
  return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[2], '1', 'px', ARGV[3])
return 1
