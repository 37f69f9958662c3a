-- W-REL: release one write hold (protocol §8.5). The last write hold wakes every waiter with
--! keys=3 argv=5
-- message 1, unless the owner still reads (downgrade: mode becomes read, no message).
-- KEYS = [N, redisson_rwlock:{N}, latch]
-- ARGV = ["1", lease ms, write field, publish command, latch PX ms]
-- Reply: nil = not held, 0 = still held, 1 = released.
-- The hash lives as long as its longest hold: a partial release sets its TTL to the lease, but
-- never below a read hold's timeout key (the owner's own reads, taken while it writes), and a
-- downgrade raises it to the longest of them (the writer's renewal may have set it shorter).
-- The read holds' timeout keys {N}:<field>:rwlock_timeout:k are named by R-ACQ's suffix rule
-- and share N's slot.
check_notify(ARGV[4], KEYS[2])
local lock, channel, latch = KEYS[1], KEYS[2], KEYS[3]
local earlier = redis.call('get', latch)
if earlier then
  return tonumber(earlier)
end
local mode = redis.call('hget', lock, 'mode')
if not mode then
  notify(ARGV[4], channel, ARGV[1])
  redis.call('set', latch, '1', 'px', ARGV[5])
  return nil
end
if mode ~= 'write' or redis.call('hexists', lock, ARGV[3]) == 0 then
  return nil
end
-- The longest TTL of a read hold in the hash (-2: none).
local function longest_read()
  local prefix = lock
  if not string.find(lock, '{', 1, true) then
    prefix = '{' .. lock .. '}'
  end
  local longest = -2
  for _, field in ipairs(redis.call('hkeys', lock)) do
    local holds = tonumber(redis.call('hget', lock, field))
    if holds and field ~= ARGV[3] then
      for k = holds, 1, -1 do
        longest = math.max(longest, redis.call('pttl', prefix .. ':' .. field .. ':rwlock_timeout:' .. k))
      end
    end
  end
  return longest
end
local left = redis.call('hincrby', lock, ARGV[3], -1)
if left > 0 then
  local longest = longest_read()
  if longest > tonumber(ARGV[2]) then
    -- A TTL read back is a Lua number: written as an integer (a huge one would print as a float).
    redis.call('pexpire', lock, string.format('%d', longest))
  else
    redis.call('pexpire', lock, ARGV[2])
  end
  redis.call('set', latch, '0', 'px', ARGV[5])
  return 0
end
redis.call('hdel', lock, ARGV[3])
if redis.call('hlen', lock) == 1 then
  redis.call('del', lock)
  notify(ARGV[4], channel, ARGV[1])
else
  redis.call('hset', lock, 'mode', 'read')
  local longest = longest_read()
  if longest > redis.call('pttl', lock) then
    redis.call('pexpire', lock, string.format('%d', longest))
  end
end
redis.call('set', latch, '1', 'px', ARGV[5])
return 1
