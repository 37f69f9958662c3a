-- G-COUNT: group multi-lock, the hold count of one owner on a set of values.
--! keys=1 argv=*
-- KEYS[1] = G; ARGV = [now (epoch ms), owner field F, H1 .. Hn]
-- Reply: the lowest lock_count of F over the values if F holds every one of them live
-- (owner field F, expire_time not past), else 0. (Redisson's isHeldByThread skips the first
-- value; this does not.)
local group, now, field = KEYS[1], tonumber(ARGV[1]), ARGV[2]
local lowest
for i = 3, #ARGV do
  local h = ARGV[i]
  local ends = tonumber(redis.call('hget', group, h .. ':' .. field .. ':expire_time'))
  local count = tonumber(redis.call('hget', group, h .. ':' .. field .. ':lock_count'))
  if redis.call('hget', group, h) ~= field or not ends or ends < now or not count then
    return 0
  end
  if not lowest or count < lowest then
    lowest = count
  end
end
return lowest or 0
