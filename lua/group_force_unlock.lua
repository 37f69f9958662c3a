-- G-FORCE: group multi-lock, free a set of values whoever holds them (sync protocol §6.2).
--! keys=2 argv=*
-- KEYS = [G, redisson_lock__channel:{G}]
-- ARGV = ["0", publish command, H1 .. Hn]
-- Every value's owner field and that owner's expire_time and lock_count fields go; "0" is
-- published on the group's channel. Reply: 1 if some value was held, else 0.
check_notify(ARGV[2], KEYS[2])
local group = KEYS[1]
local removed = 0
for i = 3, #ARGV do
  local h = ARGV[i]
  local owner = redis.call('hget', group, h)
  if owner then
    redis.call('hdel', group, h, h .. ':' .. owner .. ':expire_time', h .. ':' .. owner .. ':lock_count')
    removed = removed + 1
  end
end
notify(ARGV[2], KEYS[2], ARGV[1])
if removed > 0 then
  return 1
end
return 0
