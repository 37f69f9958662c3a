-- CDL-SET: set the count of a count-down latch that does not exist yet (sync protocol §4.2).
--! keys=2 argv=3
-- KEYS[1] = latch N, KEYS[2] = channel redisson_countdownlatch__channel__{N}
-- ARGV[1] = message "1" (closed), ARGV[2] = count, ARGV[3] = publish command
-- Reply: 1 set (and "1" announced), 0 N existed (nothing changed).
check_notify(ARGV[3], KEYS[2])
if redis.call('exists', KEYS[1]) == 1 then
  return 0
end
redis.call('set', KEYS[1], ARGV[2])
notify(ARGV[3], KEYS[2], ARGV[1])
return 1
