-- wrk script: OpenBao/Vault Transit `encrypt` of a profile-sized plaintext, a new one per request: the call a team
-- would make per capture if it built the escrow on Transit instead (no storage, no public-key crypto).
--   TOKEN=<token> KEY=<transit key> wrk -t2 -c64 -d10s -s Benchmarks/http/transit-encrypt.lua http://127.0.0.1:8200
local counter = 0
local threads = {}

function setup(thread)
  thread:set("thread_id", #threads + 1)
  table.insert(threads, thread)
end

-- Base64 of a string (Transit takes the plaintext base64-encoded); written here, as wrk's Lua has no library.
local alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
local function base64(data)
  return ((data:gsub(".", function(x)
    local bits, byte = "", x:byte()
    for i = 8, 1, -1 do bits = bits .. (byte % 2 ^ i - byte % 2 ^ (i - 1) > 0 and "1" or "0") end
    return bits
  end) .. "0000"):gsub("%d%d%d?%d?%d?%d?", function(x)
    if #x < 6 then return "" end
    local c = 0
    for i = 1, 6 do c = c + (x:sub(i, i) == "1" and 2 ^ (6 - i) or 0) end
    return alphabet:sub(c + 1, c + 1)
  end) .. ({ "", "==", "=" })[#data % 3 + 1])
end

function init(args)
  thread_id = thread_id or 0
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
  wrk.headers["X-Vault-Token"] = os.getenv("TOKEN") or ""
end

function request()
  counter = counter + 1
  local profile = string.format(
    '{"userIdentifier":"000000.load%02d%012d.0001","fullName":{"givenName":"Testy","familyName":"Load%d"},"email":"load%d.%d@example.invalid"}',
    thread_id, counter, counter, thread_id, counter)
  local body = '{"plaintext":"' .. base64(profile) .. '"}'
  return wrk.format(nil, "/v1/transit/encrypt/" .. (os.getenv("KEY") or "profile-escrow"), nil, body)
end

function response(status, headers, body)
  if status ~= 200 then
    io.stderr:write("unexpected status " .. status .. "\n")
  end
end
