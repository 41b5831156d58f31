-- wrk script: POST /v1/escrows with a unique, obviously fake profile per request.
--   TOKEN=<capture token> wrk -t2 -c64 -d30s --latency -s Benchmarks/http/capture.lua http://127.0.0.1:8080
-- Each wrk thread numbers its own users; the run id (RUN_ID, default the time) keeps runs from colliding. DELAY_MS,
-- when set, makes each connection wait that long between its requests (a steady load, not as fast as possible).
local counter = 0
local run_id = os.getenv("RUN_ID") or tostring(os.time())
local threads = {}

-- thread_id is a global that setup() sets in each thread's own Lua state (a local would shadow it).
function setup(thread)
  thread:set("thread_id", #threads + 1)
  table.insert(threads, thread)
end

function init(args)
  thread_id = thread_id or 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["Authorization"] = "Bearer " .. (os.getenv("TOKEN") or "")
end

local delay_ms = tonumber(os.getenv("DELAY_MS") or "0")

function delay()
  return delay_ms
end

function request()
  counter = counter + 1
  local user = string.format("000000.load%s%02d%012d.0001", run_id, thread_id, counter)
  local body = string.format(
    '{"userIdentifier":"%s","fullName":{"givenName":"Testy","familyName":"Load%d"},"email":"load%d.%d@example.invalid"}',
    user, counter, thread_id, counter)
  return wrk.format(nil, "/v1/escrows", nil, body)
end

function response(status, headers, body)
  if status ~= 201 and status ~= 200 then
    io.stderr:write("unexpected status " .. status .. "\n")
  end
end
