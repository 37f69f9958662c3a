-- Spin lock forced unlock (protocol §10): DEL N, no message.
--! keys=1 argv=0
-- KEYS[1] = lock hash N. Reply: 1 if a lock was deleted, else 0.
-- A key of another type is reported as WRONGTYPE instead of being deleted.
local kind = redis.call('type', KEYS[1])['ok']
if kind ~= 'none' and kind ~= 'hash' then
  return redis.error_reply('WRONGTYPE Operation against a key holding the wrong kind of value')
end
return redis.call('del', KEYS[1])
