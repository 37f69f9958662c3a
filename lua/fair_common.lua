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
    redis.call('pexpire', lock, lease)
    return true
  end
  return false
end
