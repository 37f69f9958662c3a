-- L-FORCE: delete the lock whoever holds it and wake waiters (protocol §4.4).
--! keys=2 argv=2
-- KEYS[1] = lock hash N, KEYS[2] = unlock channel
-- ARGV[1] = message "0", ARGV[2] = publish command
-- Reply: 1 when a lock was deleted, 0 when there was none.
-- Deviation on invalid state only: a key of another type is reported as WRONGTYPE instead of being
-- deleted, so a forced unlock never destroys data that is not a lock.
check_notify(ARGV[2], KEYS[2])
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
if redis.call('del', KEYS[1]) == 1 then
  notify(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0
