-- single.lua: H1, POST /workflows/One/instances with {"params": {...}}
-- (the host names each instance), one request after another on each
-- keep-alive connection.
package.path = (os.getenv("BENCH_LUA_DIR") or ".") .. "/?.lua;" .. package.path
require("report")

wrk.method = "POST"
wrk.path = "/workflows/One/instances"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"params":{"order":42,"sku":"A-1"}}'
