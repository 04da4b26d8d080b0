-- wrk script: POST a 380-byte post by a random author of USERS (from the
-- environment), as scripts/bench-resident.sh's write load.
local users = tonumber(os.getenv("USERS") or "2000")
local text = string.rep("x", 380)
math.randomseed(os.time())
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
request = function()
  local body = '{"author":"' .. math.random(1, users) .. '","body":{"text":"' .. text .. '"}}'
  return wrk.format(nil, "/v1/items", nil, body)
end
