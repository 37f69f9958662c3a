-- F-CANCEL: a fair-lock waiter gives up (protocol §7.6): leave the queue and give every waiter
--! keys=2 argv=2
-- behind it back the wait it had been charged for this one.
-- KEYS = [queue, timeouts]; ARGV = [owner field, wait ms]. Reply: nothing.
local queue = redis.call('lrange', KEYS[1], 0, -1)
local position
for i = 1, #queue do
  if queue[i] == ARGV[1] then
    position = i
    break
  end
end
if position then
  for i = position + 1, #queue do
    redis.call('zincrby', KEYS[2], -tonumber(ARGV[2]), queue[i])
  end
end
redis.call('zrem', KEYS[2], ARGV[1])
redis.call('lrem', KEYS[1], 0, ARGV[1])
return nil
