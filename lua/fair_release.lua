-- F-REL: fair lock release (protocol §7.4); hands over to the head of the queue by publishing
--! keys=5 argv=6
-- on that waiter's own channel.
-- KEYS = [N, queue, timeouts, redisson_lock__channel:{N}, unlock latch]
-- ARGV = ["0", lease ms, owner field, now (epoch ms), publish command, latch PX ms]
-- Reply: nil = not the owner, 0 = still held, 1 = released (also when the lock was absent).
-- purge() and take_if_free() come from fair_common.lua, prepended by the registry.

check_notify(ARGV[5], KEYS[4] .. ':')
local earlier = redis.call('get', KEYS[5])
if earlier then
  return tonumber(earlier)
end
purge(KEYS[2], KEYS[3], tonumber(ARGV[4]))
local function wake_next()
  local next_waiter = redis.call('lindex', KEYS[2], 0)
  if next_waiter then
    notify(ARGV[5], KEYS[4] .. ':' .. next_waiter, ARGV[1])
  end
end
if redis.call('exists', KEYS[1]) == 0 then
  wake_next()
  redis.call('set', KEYS[5], '1', 'px', ARGV[6])
  return 1
end
if redis.call('hexists', KEYS[1], ARGV[3]) == 0 then
  return nil
end
local remaining = redis.call('hincrby', KEYS[1], ARGV[3], -1)
if remaining > 0 then
  redis.call('pexpire', KEYS[1], ARGV[2])
  redis.call('set', KEYS[5], '0', 'px', ARGV[6])
  return 0
end
redis.call('del', KEYS[1])
redis.call('set', KEYS[5], '1', 'px', ARGV[6])
wake_next()
return 1
