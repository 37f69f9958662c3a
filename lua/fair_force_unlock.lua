-- F-FORCE: delete a fair lock whoever holds it and wake the head of the queue (protocol §7.5).
--! keys=4 argv=3
-- KEYS = [N, queue, timeouts, redisson_lock__channel:{N}]
-- ARGV = ["0", now (epoch ms), publish command]
-- Reply: 1 if a lock was deleted, else 0. A key of another type is reported as WRONGTYPE.
-- purge() and take_if_free() come from fair_common.lua, prepended by the registry.

check_notify(ARGV[3], KEYS[4] .. ':')
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
purge(KEYS[2], KEYS[3], tonumber(ARGV[2]))
if redis.call('del', KEYS[1]) == 1 then
  local next_waiter = redis.call('lindex', KEYS[2], 0)
  if next_waiter then
    notify(ARGV[3], KEYS[4] .. ':' .. next_waiter, ARGV[1])
  end
  return 1
end
return 0
