-- CDL-DEL: delete a count-down latch (sync protocol §4.2); waiters stay closed.
--! keys=2 argv=2
-- KEYS[1] = latch N, KEYS[2] = channel redisson_countdownlatch__channel__{N}
-- ARGV[1] = message "1" (closed), ARGV[2] = publish command
-- Reply: 1 deleted (and "1" announced), 0 absent.
check_notify(ARGV[2], KEYS[2])
if redis.call('del', KEYS[1]) == 1 then
  notify(ARGV[2], KEYS[2], ARGV[1])
  return 1
end
return 0
