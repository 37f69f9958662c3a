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

-- check_notify(command, channel): fails the script before its first write when this user may
-- not publish on the channel, so a release is either refused with nothing changed or done and
-- announced. Redis >= 7 can tell (redis.acl_check_cmd); older servers skip the check.
local function check_notify(command, channel)
  if redis.acl_check_cmd == nil then
    return
  end
  local commands = {command}
  if command == 'both' then
    commands = {'spublish', 'publish'}
  end
  for _, c in ipairs(commands) do
    if not redis.acl_check_cmd(c, channel, '0') then
      error({err = 'NOPERM this user has no permission to ' .. c .. ' on channel ' .. channel})
    end
  end
end
