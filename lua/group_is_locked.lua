-- G-ISLOCKED: group multi-lock, is any value of a set held (sync protocol §6.2)?
--! keys=1 argv=*
-- KEYS[1] = G; ARGV = [now (epoch ms), H1 .. Hn]
-- Reply: 1 if some value has an owner whose expire_time is not past, else 0.
for i = 2, #ARGV do
  local owner = redis.call('hget', KEYS[1], ARGV[i])
  if owner then
    local ends = tonumber(redis.call('hget', KEYS[1], ARGV[i] .. ':' .. owner .. ':expire_time'))
    if ends and ends >= tonumber(ARGV[1]) then
      return 1
    end
  end
end
return 0
