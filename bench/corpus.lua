-- wrk script: cycle through the benchmark corpus (bench/corpus.py writes the index),
-- one pre-formatted POST per item, on keep-alive connections; print a JSON summary.
-- usage: wrk -t1 -c16 -d10s -s bench/corpus.lua https://127.0.0.1:8443 -- DIR/index
local requests = {}
local count = 0
local next_index = 0

function init(args)
  for line in io.lines(args[1]) do
    local path, file = line:match("^(%S+) (%S+)$")
    local handle = assert(io.open(file, "rb"))
    local body = handle:read("*a")
    handle:close()
    count = count + 1
    requests[count] = wrk.format("POST", path .. "?timeout=10s", {
      ["Host"] = "127.0.0.1",
      ["Content-Type"] = "application/json",
      ["Accept"] = "application/json",
    }, body)
  end
  next_index = math.random(count) - 1
end

function request()
  next_index = next_index % count + 1
  return requests[next_index]
end

function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"duration_us":%d,"bytes":%d,"connect":%d,"read":%d,"write":%d,' ..
    '"status":%d,"timeout":%d,"p50_us":%d,"p99_us":%d,"max_us":%d}\n',
    summary.requests, summary.duration, summary.bytes, e.connect, e.read, e.write,
    e.status, e.timeout, latency:percentile(50), latency:percentile(99), latency.max))
end
