-- batch.lua: H2, POST /workflows/One/instances/batch of 100 instances,
-- {"instances": [{"params": {...}}, ...]} (the host names each one).
package.path = (os.getenv("BENCH_LUA_DIR") or ".") .. "/?.lua;" .. package.path
require("report")

local per = tonumber(os.getenv("BENCH_PER_REQUEST") or "100")
local items = {}
for i = 1, per do
  items[i] = string.format('{"params":{"order":%d,"sku":"A-1"}}', i)
end
wrk.method = "POST"
wrk.path = "/workflows/One/instances/batch"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"instances":[' .. table.concat(items, ",") .. ']}'

-- A batch answers 200 even when some of its instances were refused: each
-- reply's "errors" must be empty, counted per thread and added up by
-- report.lua's done() (through wrk's thread:get).
local threads = {}
function setup(thread) table.insert(threads, thread) end

refused = 0
function response(status, headers, body)
  if status == 200 and not body:find('"errors":[]', 1, true) then
    refused = refused + 1
  end
end

function extra_errors()
  local n = 0
  for _, t in ipairs(threads) do n = n + (t:get("refused") or 0) end
  return n
end
