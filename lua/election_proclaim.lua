-- Election proclamation (this crate's, no Redisson counterpart): a leader's value beside the lock.
--! keys=2 argv=3
-- KEYS[1] = lock hash N, KEYS[2] = redisson_lock_leader:{N} (a hash: holder, value)
-- ARGV[1] = the leader's owner field, ARGV[2] = 'set' or 'clear', ARGV[3] = the value
-- set: only if ARGV[1] holds N, replaces the proclamation; reply 1, else 0 (nothing changed).
-- clear: deletes the proclamation if ARGV[1] made it; reply 1 if deleted, else 0.
if ARGV[2] == 'set' then
  if redis.call('hexists', KEYS[1], ARGV[1]) == 0 then
    return 0
  end
  redis.call('del', KEYS[2])
  redis.call('hset', KEYS[2], 'holder', ARGV[1], 'value', ARGV[3])
  return 1
end
if redis.call('type', KEYS[2]).ok == 'hash' and redis.call('hget', KEYS[2], 'holder') == ARGV[1] then
  redis.call('del', KEYS[2])
  return 1
end
return 0
