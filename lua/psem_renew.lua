-- PS-LEASE, batched: the watchdog's renewal of permits acquired without a lease, each entry
--! keys=* argv=*
-- exactly Java's updateLeaseTime(permitId, leaseTime) (sync protocol §3.2).
-- Entry i (from 0): KEYS[3i+1] = semaphore N, KEYS[3i+2] = sorted set {N}:timeout,
-- KEYS[3i+3] = channel redisson_sc:{N}; ARGV[4i+2] = permit id (16 raw bytes),
-- ARGV[4i+3] = new deadline (epoch ms), ARGV[4i+4] = now (epoch ms), ARGV[4i+5] = publish
-- command. ARGV[1] = the watchdog timeout in ms (the lease the deadlines were computed with).
-- Per entry: RECLAIM(now, all) (expired permits go back to N, announced), then the id's score
-- becomes the new deadline if the id is still in the set.
-- Reply: one integer per entry, 1 = renewed, 0 = the id is gone from the set (released by its
-- id, reclaimed after its deadline, or the keys deleted). A key of another type counts as gone
-- instead of aborting the whole batch.
local entries = #KEYS / 3
for i = 0, entries - 1 do
  check_notify(ARGV[4 * i + 5], KEYS[3 * i + 3])
end
local renewed = {}
for i = 0, entries - 1 do
  local n, timeouts, channel = KEYS[3 * i + 1], KEYS[3 * i + 2], KEYS[3 * i + 3]
  local id, deadline, now, command = ARGV[4 * i + 2], ARGV[4 * i + 3], ARGV[4 * i + 4], ARGV[4 * i + 5]
  renewed[i + 1] = 0
  if redis.call('type', timeouts).ok == 'zset' then
    local expired = redis.call('zremrangebyscore', timeouts, 0, now)
    if expired > 0 then
      local now_available = redis.pcall('incrby', n, expired)
      if type(now_available) == 'number' and now_available > 0 then
        notify(command, channel, now_available)
      end
    end
    if redis.call('zscore', timeouts, id) then
      redis.call('zadd', timeouts, deadline, id)
      renewed[i + 1] = 1
    end
  end
end
return renewed
