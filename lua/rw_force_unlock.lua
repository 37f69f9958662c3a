-- Read or write forced unlock (protocol §8.6): delete N only if it is in the given mode.
--! keys=2 argv=3
-- KEYS = [N, redisson_rwlock:{N}]; ARGV = [message "0" (read) or "1" (write), publish command,
-- mode "read" or "write"]. Reply: 1 if deleted, else 0.
check_notify(ARGV[2], KEYS[2])
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if redis.call('hget', KEYS[1], 'mode') == ARGV[3] then
  redis.call('del', KEYS[1])
  notify(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0
