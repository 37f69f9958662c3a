-- G-ACQ: group multi-lock, take every value of a set or none (sync protocol §6.2).
--! keys=1 argv=*
-- KEYS[1] = group hash G
-- ARGV = [lease ms, now (epoch ms, client clock), owner field F, H1 .. Hn]
-- Fields of G: Hi -> owner field; Hi:F:expire_time -> deadline (epoch ms); Hi:F:lock_count.
-- Reply: nil when every value was taken (or re-entered); otherwise the ms until the latest
-- live conflicting hold ends (nothing changes then).
local group, field = KEYS[1], ARGV[3]
local lease, now = tonumber(ARGV[1]), tonumber(ARGV[2])
local existed = redis.call('exists', group) == 1
if existed then
  local latest
  for i = 4, #ARGV do
    local owner = redis.call('hget', group, ARGV[i])
    if owner and owner ~= field then
      local ends = tonumber(redis.call('hget', group, ARGV[i] .. ':' .. owner .. ':expire_time'))
      if ends and ends > now and (not latest or ends > latest) then
        latest = ends
      end
    end
  end
  if latest then
    return latest - now
  end
end
local deadline = now + lease
for i = 4, #ARGV do
  local h = ARGV[i]
  local owner = redis.call('hget', group, h)
  local expire_field = h .. ':' .. field .. ':expire_time'
  local count_field = h .. ':' .. field .. ':lock_count'
  local ends = tonumber(redis.call('hget', group, expire_field))
  if owner == field and ends and ends >= now then
    -- A live hold of this owner: a re-entry.
    redis.call('hincrby', group, count_field, 1)
    if ends < deadline then
      redis.call('hset', group, expire_field, deadline)
    end
  else
    -- Free, or the hold there expired: the value is this owner's with a count of 1; the
    -- expired holder's fields go with it.
    if owner and owner ~= field then
      redis.call('hdel', group, h .. ':' .. owner .. ':expire_time', h .. ':' .. owner .. ':lock_count')
    end
    redis.call('hset', group, h, field, expire_field, deadline, count_field, 1)
  end
end
local pttl = redis.call('pttl', group)
if (not existed) or (pttl > 0 and pttl < lease) then
  redis.call('pexpire', group, lease)
end
return nil
