-- R-REL: release one read hold (protocol §8.3). The hash lives as long as the longest-living
--! keys=5 argv=4
-- read hold of anyone (dead readers, whose timeout keys expired, are ignored).
-- KEYS = [N, redisson_rwlock:{N}, TP (this reader's timeout base), P ({N} or N), latch]
-- ARGV = ["0", reader field, publish command, latch PX ms]
-- Reply: nil = not held (or no lock), 0 = still locked, 1 = released and waiters woken.
check_notify(ARGV[3], KEYS[2])
local lock, channel, own, prefix, latch = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local earlier = redis.call('get', latch)
if earlier then
  return tonumber(earlier)
end
local mode = redis.call('hget', lock, 'mode')
if not mode then
  notify(ARGV[3], channel, ARGV[1])
  redis.call('set', latch, '1', 'px', ARGV[4])
  return nil
end
if redis.call('hexists', lock, ARGV[2]) == 0 then
  return nil
end
local left = redis.call('hincrby', lock, ARGV[2], -1)
if left == 0 then
  redis.call('hdel', lock, ARGV[2])
end
-- The hold whose timeout key ends first goes: the newest key (left + 1) is deleted after its
-- TTL moved to that one, so the keys left are the longest (a reader's holds of different
-- leases, released in any order, never leave the hash shorter than one that remains). A hold
-- whose key has expired (its lease ended while the hash lived on) ended first of all: the
-- newest key moves into its place, and no live key goes.
local top = own .. ':' .. (left + 1)
local top_ttl = redis.call('pttl', top)
local first, first_ttl = nil, top_ttl
for k = 1, left do
  local ttl = redis.call('pttl', own .. ':' .. k)
  if ttl == -2 then
    first, first_ttl = own .. ':' .. k, ttl
    break
  end
  if ttl >= 0 and (first_ttl < 0 or ttl < first_ttl) then
    first, first_ttl = own .. ':' .. k, ttl
  end
end
if first and top_ttl > 0 then
  if first_ttl == -2 then
    redis.call('set', first, 1, 'px', string.format('%d', top_ttl))
  else
    redis.call('pexpire', first, string.format('%d', top_ttl))
  end
end
redis.call('del', top)
if redis.call('hlen', lock) > 1 then
  local longest = -3
  for _, field in ipairs(redis.call('hkeys', lock)) do
    local holds = tonumber(redis.call('hget', lock, field))
    if holds then
      for k = holds, 1, -1 do
        local ttl = redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. k)
        longest = math.max(longest, ttl)
      end
    end
  end
  if longest > 0 then
    -- Under the owner's writer (mode write: the writer's field has no timeout keys), the TTL is
    -- the writer's too: never lowered here (Redisson's R-REL lowers it to the read hold left).
    if mode == 'write' then
      longest = math.max(longest, redis.call('pttl', lock))
    end
    redis.call('pexpire', lock, string.format('%d', longest))
    redis.call('set', latch, '0', 'px', ARGV[4])
    return 0
  end
  if mode == 'write' then
    redis.call('set', latch, '0', 'px', ARGV[4])
    return 0
  end
end
redis.call('del', lock)
notify(ARGV[3], channel, ARGV[1])
redis.call('set', latch, '1', 'px', ARGV[4])
return 1
