-- report.lua: the done() of every wrk script here.  Prints, like the
-- other benches, "NAME  value unit  [setting]" lines: the rate (requests/s
-- times BENCH_PER_REQUEST, the instances each request creates), latency
-- p50/p99 from wrk's distribution, and the errors (non-2xx replies,
-- socket errors), which make run.sh fail.
local name = os.getenv("BENCH_NAME") or "H?"
local setting = os.getenv("BENCH_SETTING") or ""
local per = tonumber(os.getenv("BENCH_PER_REQUEST") or "1")
local unit = os.getenv("BENCH_UNIT") or "inst/s"
local rate = os.getenv("BENCH_RATE") or "creates/s"

local function line(figure, value, u)
  io.write(string.format("%-28s %12.3f %-10s [%s]\n", name .. " " .. figure,
                         value, u, setting))
end

function done(summary, latency, requests)
  local s = summary.duration / 1e6
  local e = summary.errors
  line(rate, summary.requests * per / s, unit)
  if per ~= 1 then line("requests/s", summary.requests / s, "req/s") end
  line("latency p50", latency:percentile(50) / 1000, "ms")
  line("latency p99", latency:percentile(99) / 1000, "ms")
  local bad = e.connect + e.read + e.write + e.status + e.timeout
  if extra_errors then bad = bad + extra_errors() end
  line("errors", bad, "req")
  if bad > 0 then
    io.stderr:write(string.format(
      "%s: %d errors (connect %d, read %d, write %d, status %d, timeout %d)\n",
      name, bad, e.connect, e.read, e.write, e.status, e.timeout))
    local f = io.open(os.getenv("BENCH_ERRFILE") or "/dev/null", "w")
    if f then f:write(bad, "\n"); f:close() end
  end
end
