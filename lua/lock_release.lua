-- L-REL: release one hold of a reentrant lock (protocol §4.3, 3.24+ form with unlock latch).
--! keys=3 argv=5
-- KEYS[1] = lock hash N, KEYS[2] = unlock channel, KEYS[3] = unlock latch for this request
-- ARGV[1] = message "0", ARGV[2] = lease in ms (re-armed on partial release),
-- ARGV[3] = owner field, ARGV[4] = publish command, ARGV[5] = latch PX in ms
-- Reply: nil = caller is not the owner, 0 = still held (count decremented), 1 = fully released.
check_notify(ARGV[4], KEYS[2])
local earlier = redis.call('get', KEYS[3])
if earlier then
  return tonumber(earlier)
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local remaining = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if remaining > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[3], '0', 'px', ARGV[5])
  return 0
end
redis.call('del', KEYS[1])
notify(ARGV[4], KEYS[2], ARGV[1])
redis.call('set', KEYS[3], '1', 'px', ARGV[5])
return 1
