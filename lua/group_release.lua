-- G-REL: group multi-lock, release one hold of every value of a set (sync protocol §6.2).
--! keys=3 argv=*
-- KEYS = [G, redisson_lock__channel:{G}, unlock latch of this request]
-- ARGV = [owner field F, message "0", lease ms, publish command, latch PX ms, now, H1 .. Hn]
-- Reply: nil = F does not hold every value (nothing changes), 0 = still held (counts
-- decremented), 1 = every value released. Every successful release publishes "0" on the
-- group's channel (partial ones too, as Redisson does: waiters re-check).
check_notify(ARGV[4], KEYS[2])
local group, field = KEYS[1], ARGV[1]
local earlier = redis.call('get', KEYS[3])
if earlier then
  return tonumber(earlier)
end
if redis.call('exists', group) == 0 then
  notify(ARGV[4], KEYS[2], ARGV[2])
  return nil
end
local lease, now = tonumber(ARGV[3]), tonumber(ARGV[6])
-- Owner-checked first, so a release that fails changes nothing.
for i = 7, #ARGV do
  local h = ARGV[i]
  local ends = tonumber(redis.call('hget', group, h .. ':' .. field .. ':expire_time'))
  if redis.call('hget', group, h) ~= field or not ends or ends < now then
    return nil
  end
end
local all_released = true
for i = 7, #ARGV do
  local h = ARGV[i]
  local expire_field = h .. ':' .. field .. ':expire_time'
  local count_field = h .. ':' .. field .. ':lock_count'
  if redis.call('hincrby', group, count_field, -1) <= 0 then
    redis.call('hdel', group, h, expire_field, count_field)
  else
    all_released = false
    if tonumber(redis.call('hget', group, expire_field)) < now + lease then
      redis.call('hset', group, expire_field, now + lease)
    end
  end
end
notify(ARGV[4], KEYS[2], ARGV[2])
if all_released then
  redis.call('set', KEYS[3], '1', 'px', ARGV[5])
  return 1
end
local pttl = redis.call('pttl', group)
if pttl > 0 and pttl < lease then
  redis.call('pexpire', group, lease)
end
redis.call('set', KEYS[3], '0', 'px', ARGV[5])
return 0
