-- SEM-ACQ: take permits from a semaphore (sync protocol §2.2).
--! keys=1 argv=1
-- KEYS[1] = semaphore N (a string: the available permits)
-- ARGV[1] = permits wanted (> 0)
-- Reply: 1 taken, 0 not enough (nothing changed; an absent N has no permits).
local available = redis.call('get', KEYS[1])
if available ~= false and tonumber(available) >= tonumber(ARGV[1]) then
  redis.call('decrby', KEYS[1], ARGV[1])
  return 1
end
return 0
