-- CDL-DOWN: count a count-down latch down by one (sync protocol §4.2).
--! keys=2 argv=2
-- KEYS[1] = latch N, KEYS[2] = channel redisson_countdownlatch__channel__{N}
-- ARGV[1] = message "0" (open), ARGV[2] = publish command
-- At zero or below N is deleted; only the step to exactly zero announces "0".
-- Reply: the count after the step (negative when N was absent).
check_notify(ARGV[2], KEYS[2])
local count = redis.call('decr', KEYS[1])
if count <= 0 then
  redis.call('del', KEYS[1])
end
if count == 0 then
  notify(ARGV[2], KEYS[2], ARGV[1])
end
return count
