-- notify(command, channel, message): publishes an unlock message with the command the client
-- resolved: 'publish', 'spublish', or 'both' (SPUBLISH then PUBLISH: the bridge between
-- Redisson fleets before and after 3.22 on one cluster). The script registry prepends this file
-- to every script that publishes.
local function notify(command, channel, message)
  if command == 'both' then
    redis.call('spublish', channel, message)
    return redis.call('publish', channel, message)
  end
  return redis.call(command, channel, message)
end
