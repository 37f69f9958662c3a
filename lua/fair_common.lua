-- Helpers shared by the fair-lock scripts; the script registry prepends this file to each
-- of them (Redis scripts cannot include one another).

-- PURGE(now): drop dead waiters at the head of the queue (deadline passed).
local function purge(queue, timeouts, now)
  while true do
    local head = redis.call('lindex', queue, 0)
    if not head then return end
    local deadline = redis.call('zscore', timeouts, head)
    if deadline and tonumber(deadline) <= now then
      redis.call('zrem', timeouts, head)
      redis.call('lpop', queue)
    else
      return
    end
  end
end

-- The lock is free and nobody else is first in line: take it, leave the queue, and pull every
-- remaining deadline forward by the wait this waiter no longer needs.
local function take_if_free(lock, queue, timeouts, field, lease, wait)
  if redis.call('exists', lock) == 0 then
    local head = redis.call('lindex', queue, 0)
    if (not head) or head == field then
      redis.call('lpop', queue)
      redis.call('zrem', timeouts, field)
      local waiting = redis.call('zrange', timeouts, 0, -1)
      for i = 1, #waiting do
        redis.call('zincrby', timeouts, -wait, waiting[i])
      end
      redis.call('hset', lock, field, 1)
      redis.call('pexpire', lock, lease)
      return true
    end
  end
  if redis.call('hexists', lock, field) == 1 then
    redis.call('hincrby', lock, field, 1)
    -- A re-entry never lowers the TTL (as L-ACQ).
    if redis.call('pttl', lock) < tonumber(lease) then
      redis.call('pexpire', lock, lease)
    end
    return true
  end
  return false
end

-- A waiting caller that did not get the lock: an already queued one sleeps at most the lock's
-- remaining TTL; a new one joins the queue behind the last waiter (or the holder) with the
-- deadline ttl + wait + now. Reply: the TTL bound for the waiter's next sleep.
local function join_queue(lock, queue, timeouts, field, wait, now)
  if redis.call('zscore', timeouts, field) then
    return math.max(0, redis.call('pttl', lock))
  end
  local ttl
  local last = redis.call('lindex', queue, -1)
  local last_deadline = last and last ~= field and redis.call('zscore', timeouts, last)
  if last_deadline then
    ttl = tonumber(last_deadline) - now
  else
    ttl = redis.call('pttl', lock)
  end
  if redis.call('zadd', timeouts, ttl + wait + now, field) == 1 then
    redis.call('rpush', queue, field)
  end
  return ttl
end
