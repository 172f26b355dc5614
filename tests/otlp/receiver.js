// receiver.js — the stand-in OTLP/HTTP collector of test_telemetry, run by
// receiver.sh: listens on 127.0.0.1:PORT (0: one the kernel picks,
// printed as "port N"), takes POST /v1/traces bodies in OTLP's JSON
// encoding and decodes each with OpenTelemetry's own message definitions
// (the protobufjs code generated from opentelemetry-proto that
// @opentelemetry/otlp-transformer ships), not with duro's idea of them:
//
//  - the ids (hex in OTLP/JSON, bytes in the proto) are made bytes of
//    the right length, then the request is read by fromObject, which
//    throws on a member of the wrong type, encoded to protobuf and
//    decoded back, and checked by verify;
//  - the decoded request, made JSON again by toObject, must equal the
//    body: a member the definitions do not know, or one read as another
//    value, shows up there;
//  - each span: a trace id of 16 bytes and span id of 8, neither all
//    zero, a parent of 8 bytes or none, start <= end, a known kind and
//    status code.
//
// Every span of a valid body is appended to OUT, one JSON object a line,
// flattened from the decoded message with its resource's service.name;
// a body that breaks a rule is answered 400 and {"invalid": why}
// appended instead.
//
// Usage: node receiver.js PORT OUT
"use strict";

const fs = require("fs");
const http = require("http");
const root = require("@opentelemetry/otlp-transformer/build/src/generated/root");

const proto = root.opentelemetry.proto;
const Request = proto.collector.trace.v1.ExportTraceServiceRequest;
const ID_BYTES = { traceId: 16, spanId: 8, parentSpanId: 8 };

// A copy of v with each id member (at any depth) as bytes; throws on an id
// that is not hex of its length (a parent may be empty: none).
function idsAsBytes(v, where) {
  if (Array.isArray(v)) return v.map((x, i) => idsAsBytes(x, `${where}[${i}]`));
  if (v === null || typeof v !== "object") return v;
  const out = {};
  for (const [k, x] of Object.entries(v)) {
    if (k in ID_BYTES && typeof x === "string") {
      const ok = /^[0-9a-fA-F]*$/.test(x) &&
        (x.length === 2 * ID_BYTES[k] || (k === "parentSpanId" && x === ""));
      if (!ok) throw new Error(`${where}.${k}: "${x}" is not ${ID_BYTES[k]} bytes of hex`);
      out[k] = Buffer.from(x, "hex");
    } else {
      out[k] = idsAsBytes(x, `${where}.${k}`);
    }
  }
  return out;
}

// toObject's bytes (base64) made hex again where they are ids.
function idsAsHex(v) {
  if (Array.isArray(v)) return v.map(idsAsHex);
  if (v === null || typeof v !== "object") return v;
  const out = {};
  for (const [k, x] of Object.entries(v))
    out[k] = k in ID_BYTES && typeof x === "string"
      ? Buffer.from(x, "base64").toString("hex") : idsAsHex(x);
  return out;
}

// The form two equal requests share: numbers as decimal strings (an int64
// may be either in OTLP/JSON), ids lowercase, empty lists and nulls
// dropped (proto3 cannot tell them from absent).
function canonical(v, key) {
  if (Array.isArray(v)) return v.map((x) => canonical(x));
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return key in ID_BYTES ? v.toLowerCase() : v;
  if (v === null || typeof v !== "object") return v;
  const out = {};
  for (const k of Object.keys(v).sort()) {
    const x = v[k];
    if (x === null || x === undefined || (Array.isArray(x) && x.length === 0)) continue;
    out[k] = canonical(x, k);
  }
  return out;
}

// The first path where a and b differ, or null.
function difference(a, b, where) {
  if (typeof a !== typeof b || Array.isArray(a) !== Array.isArray(b))
    return `${where}: ${JSON.stringify(a)} read as ${JSON.stringify(b)}`;
  if (a === null || typeof a !== "object")
    return a === b ? null : `${where}: ${JSON.stringify(a)} read as ${JSON.stringify(b)}`;
  const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
  for (const k of keys) {
    if (!(k in b)) return `${where}.${k}: not a member of the message`;
    if (!(k in a)) return `${where}.${k}: appeared in the decoding`;
    const d = difference(a[k], b[k], `${where}.${k}`);
    if (d) return d;
  }
  return null;
}

function anyValue(v) {
  if (!v) return null;
  if (v.stringValue !== undefined) return v.stringValue;
  if (v.intValue !== undefined) return Number(v.intValue);
  if (v.boolValue !== undefined) return v.boolValue;
  if (v.doubleValue !== undefined) return v.doubleValue;
  return JSON.stringify(v);
}

function attributes(list) {
  const out = {};
  for (const a of list || []) out[a.key] = anyValue(a.value);
  return out;
}

const ZERO = /^0*$/;

// The body decoded and checked: its spans, flattened; throws why not.
function decode(text) {
  const doc = JSON.parse(text);
  const msg = Request.fromObject(idsAsBytes(doc, "request"));
  const back = Request.decode(Request.encode(msg).finish());
  const bad = Request.verify(back);
  if (bad) throw new Error(bad);
  const read = Request.toObject(back, { longs: String, enums: Number, bytes: String });
  const d = difference(canonical(doc), canonical(idsAsHex(read)), "request");
  if (d) throw new Error(d);
  const spans = [];
  for (const rs of read.resourceSpans || []) {
    const res = attributes(rs.resource && rs.resource.attributes);
    for (const ss of rs.scopeSpans || []) {
      for (const s of ss.spans || []) {
        const { traceId, spanId, parentSpanId = "" } = idsAsHex(s);
        const name = s.name;
        if (traceId.length !== 32 || ZERO.test(traceId))
          throw new Error(`${name}: traceId "${traceId}"`);
        if (spanId.length !== 16 || ZERO.test(spanId))
          throw new Error(`${name}: spanId "${spanId}"`);
        if (parentSpanId !== "" && parentSpanId.length !== 16)
          throw new Error(`${name}: parentSpanId "${parentSpanId}"`);
        const start = BigInt(s.startTimeUnixNano || "0");
        const end = BigInt(s.endTimeUnixNano || "0");
        if (start > end) throw new Error(`${name}: starts after it ends`);
        if (!Object.values(proto.trace.v1.Span.SpanKind).includes(s.kind || 0))
          throw new Error(`${name}: kind ${s.kind}`);
        const status = s.status || {};
        if (![0, 1, 2].includes(status.code || 0))
          throw new Error(`${name}: status ${JSON.stringify(status)}`);
        spans.push({
          service: res["service.name"],
          scope: ss.scope && ss.scope.name,
          traceId, spanId, parentSpanId, name,
          kind: s.kind || 0,
          start: Number(start), end: Number(end),
          attributes: attributes(s.attributes),
          links: (s.links || []).map((l) => {
            const h = idsAsHex(l);
            return { traceId: h.traceId, spanId: h.spanId, attributes: attributes(l.attributes) };
          }),
          status: status.code || 0,
          message: status.message || "",
        });
      }
    }
  }
  return spans;
}

const [port, out] = process.argv.slice(2);
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    let lines, code;
    try {
      if (req.method !== "POST" || req.url !== "/v1/traces")
        throw new Error(`${req.method} ${req.url}`);
      const type = req.headers["content-type"] || "";
      if (!type.startsWith("application/json")) throw new Error(`Content-Type ${type}`);
      lines = decode(Buffer.concat(chunks).toString("utf8")).map((s) => JSON.stringify(s));
      code = 200;
    } catch (e) {
      lines = [JSON.stringify({ invalid: String(e.message || e) })];
      code = 400;
    }
    fs.appendFileSync(out, lines.map((l) => l + "\n").join(""));
    res.writeHead(code, { "Content-Type": "application/json" });
    res.end("{}");
  });
});
server.listen(Number(port), "127.0.0.1", () => {
  console.log(`port ${server.address().port}`);
});
