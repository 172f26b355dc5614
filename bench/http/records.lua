-- records.lua: P1 over HTTP, POST /pipelines/events of a JSON array of
-- 100 records of 100 bytes each (as duro-bench's P1 makes them).
package.path = (os.getenv("BENCH_LUA_DIR") or ".") .. "/?.lua;" .. package.path
require("report")

local per = tonumber(os.getenv("BENCH_PER_REQUEST") or "100")
local items = {}
for k = 1, per do
  local r = string.format('{"k":%d,"page":"/products/%06d","user":"u-%06d","pad":"',
                          k, k * 7919 % 1000000, k * 31 % 1000000)
  items[k] = r .. string.rep("x", 98 - #r) .. '"}'
end
wrk.method = "POST"
wrk.path = "/pipelines/events"
wrk.headers["Content-Type"] = "application/json"
wrk.body = "[" .. table.concat(items, ",") .. "]"
