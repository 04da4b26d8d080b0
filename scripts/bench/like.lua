-- wrk script: a like (PUT /v1/items/{id}/reactions/like/{user}) of a random
-- post, read from ITEMS_FILE (written by populate.py), by a random one of
-- USERS users. A user liking a post twice is answered alike, so the mix
-- of new likes and repeated ones stays the same through a run.
local users = tonumber(os.getenv("USERS") or "2000")
local ids = {}
for line in io.lines(os.getenv("ITEMS_FILE")) do
  ids[#ids + 1] = line
end
math.randomseed(os.time())
request = function()
  local id = ids[math.random(1, #ids)]
  return wrk.format("PUT", "/v1/items/" .. id .. "/reactions/like/" .. math.random(1, users))
end
