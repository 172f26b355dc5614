#!/usr/bin/env python3
"""otlp_receiver: a stand-in OTLP/HTTP collector for test_telemetry.

Listens on 127.0.0.1:PORT (0: any; the port it got is printed as
"port N" on stdout), takes POST /v1/traces bodies in OTLP's JSON
encoding, checks each span against the OTLP specification's JSON
mapping (ids in hex of the right length and not all zero, times as
decimal strings of nanoseconds with start <= end, a known kind and
status code, attributes with typed values) and appends the valid spans,
one JSON object a line, flattened with their resource's service.name,
to OUT.  A body that breaks a rule is answered 400 and its reason
appended to OUT as {"invalid": why}.

Usage: otlp_receiver.py PORT OUT"""
import http.server
import json
import re
import sys

HEX32 = re.compile(r"^[0-9a-f]{32}$")
HEX16 = re.compile(r"^[0-9a-f]{16}$")
NANOS = re.compile(r"^[0-9]+$")
VALUE_KEYS = {"stringValue", "intValue", "boolValue", "doubleValue",
              "arrayValue", "kvlistValue", "bytesValue"}


def attrs(lst, where):
    out = {}
    for a in lst or []:
        if not isinstance(a.get("key"), str):
            raise ValueError(f"{where}: an attribute without a key")
        v = a.get("value") or {}
        if len(v) != 1 or next(iter(v)) not in VALUE_KEYS:
            raise ValueError(f"{where}: attribute {a['key']}: value {v}")
        k, x = next(iter(v.items()))
        if k == "intValue":
            x = int(x)  # a decimal string (or number) in JSON
        out[a["key"]] = x
    return out


def check(doc):
    spans = []
    for rs in doc["resourceSpans"]:
        res = attrs(rs.get("resource", {}).get("attributes"), "resource")
        for ss in rs["scopeSpans"]:
            for s in ss["spans"]:
                name = s.get("name")
                if not HEX32.match(s["traceId"]) or set(s["traceId"]) == {"0"}:
                    raise ValueError(f"{name}: traceId {s['traceId']}")
                if not HEX16.match(s["spanId"]) or set(s["spanId"]) == {"0"}:
                    raise ValueError(f"{name}: spanId {s['spanId']}")
                parent = s.get("parentSpanId", "")
                if parent and not HEX16.match(parent):
                    raise ValueError(f"{name}: parentSpanId {parent}")
                start, end = s["startTimeUnixNano"], s["endTimeUnixNano"]
                if not (NANOS.match(str(start)) and NANOS.match(str(end))):
                    raise ValueError(f"{name}: times {start} {end}")
                if int(start) > int(end):
                    raise ValueError(f"{name}: starts after it ends")
                if s.get("kind", 0) not in range(6):
                    raise ValueError(f"{name}: kind {s.get('kind')}")
                status = s.get("status", {})
                if status.get("code", 0) not in (0, 1, 2):
                    raise ValueError(f"{name}: status {status}")
                spans.append({
                    "service": res.get("service.name"),
                    "traceId": s["traceId"], "spanId": s["spanId"],
                    "parentSpanId": parent, "name": name,
                    "start": int(start), "end": int(end),
                    "attributes": attrs(s.get("attributes"), name),
                    "status": status.get("code", 0),
                    "message": status.get("message", ""),
                })
    return spans


class Handler(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        try:
            if self.path != "/v1/traces":
                raise ValueError(f"path {self.path}")
            if not self.headers.get("Content-Type", "").startswith(
                    "application/json"):
                raise ValueError("Content-Type " +
                                 str(self.headers.get("Content-Type")))
            spans = check(json.loads(body))
            lines = [json.dumps(s) for s in spans]
            code = 200
        except (ValueError, KeyError, TypeError) as e:
            lines = [json.dumps({"invalid": str(e)})]
            code = 400
        with open(OUT, "a", encoding="utf-8") as f:
            for line in lines:
                f.write(line + "\n")
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args):
        pass


if __name__ == "__main__":
    OUT = sys.argv[2]
    server = http.server.HTTPServer(("127.0.0.1", int(sys.argv[1])), Handler)
    print(f"port {server.server_address[1]}", flush=True)
    server.serve_forever()
