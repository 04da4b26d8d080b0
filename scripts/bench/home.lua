-- wrk script: GET a random user's home page (20 entries). USERS and DELAY_MS
-- come from the environment; DELAY_MS > 0 paces each connection (about
-- connections * 1000 / DELAY_MS requests per second at most).
local users = tonumber(os.getenv("USERS") or "2000")
local delay_ms = tonumber(os.getenv("DELAY_MS") or "0")
math.randomseed(os.time())
request = function()
  return wrk.format("GET", "/v1/users/" .. math.random(1, users) .. "/home?limit=20")
end
if delay_ms > 0 then
  delay = function() return delay_ms end
end
