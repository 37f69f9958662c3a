-- Whether this user may listen on some channels: ARGV = [command ("subscribe"/"ssubscribe"),
-- channel...]. Reply: the position (1-based, among the channels) of the first channel it may
-- not listen on, or 0. Redis >= 7 can tell (redis.acl_check_cmd); older servers answer 0.
-- The subscription registry asks before subscribing, because a refused SUBSCRIBE's error
-- reply is not tied to the command that caused it on a subscriber connection.
--! keys=0 argv=*
if redis.acl_check_cmd == nil then
  return 0
end
for i = 2, #ARGV do
  if not redis.acl_check_cmd(ARGV[1], ARGV[i]) then
    return i - 1
  end
end
return 0
