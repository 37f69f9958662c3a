-- isLocked of the read or the write half (protocol §8.6).
--! keys=1 argv=1
-- KEYS = [N]; ARGV = ["read" or "write"]. Reply: 1 or 0.
-- read: mode is read, or mode is write and the writer also holds a read lock (HLEN > 2).
local mode = redis.call('hget', KEYS[1], 'mode')
if ARGV[1] == 'write' then
  return mode == 'write' and 1 or 0
end
if mode == 'read' or (mode == 'write' and redis.call('hlen', KEYS[1]) > 2) then
  return 1
end
return 0
