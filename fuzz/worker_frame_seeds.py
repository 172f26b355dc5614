#!/usr/bin/env python3
"""Writes fuzz_worker_frame's seeds into fuzz/corpus/fuzz_worker_frame/:
valid frames of several kinds as a worker writes them (worker_api.c), each
its u32 kind then its body, in host byte order (little-endian here).
Kinds and fields are worker_proto.h's."""

import os
import struct

DO, SLEEP, SLEEP_UNTIL, WAIT = 16, 17, 18, 19
STEP_ERROR, SET_OUTPUT, FAIL, ERROR_IS = 20, 21, 22, 23
ENV_WORKFLOW, WF_CREATE, WF_EVENT, ENV_QUEUE = 24, 25, 26, 27
QUEUE_SEND, QUEUE_BATCH, LOG, CANCELLED = 28, 29, 30, 31
RETURN, END, LIMIT = 32, 33, 35


def u32(v):
    return struct.pack("<I", v)


def u64(v):
    return struct.pack("<Q", v)


def i64(v):
    return struct.pack("<q", v)


def s(text):
    """A string: its length + 1 (0 for None), its bytes and a NUL."""
    if text is None:
        return u32(0)
    b = text.encode()
    return u32(len(b) + 1) + b + b"\0"


SEEDS = {
    "do": (DO, s("charge") + u32(1) + u32(1) + u32(3) + s("1 second") +
           u32(0) + s("30 seconds") + u64(0x401000) + u64(0) + u32(1)),
    "do_bare": (DO, s("fetch") + u32(0) + u32(0) + u32(0) + s(None) + u32(0) +
                s(None) + u64(0x401000) + u64(0x7f00) + u32(0)),
    "sleep": (SLEEP, s("nap") + s("10 minutes")),
    "sleep_until": (SLEEP_UNTIL, s("wake") + i64(1767225600000)),
    "wait": (WAIT, s("approval") + s("approved") + s("1 day") + u32(1)),
    "step_error": (STEP_ERROR, b""),
    "set_output": (SET_OUTPUT, s('{"total":42}')),
    "fail": (FAIL, s("card declined")),
    "error_is": (ERROR_IS, s("step.timeout")),
    "env_workflow": (ENV_WORKFLOW, s("orders")),
    "wf_create": (WF_CREATE, s("orders") + s("o-1") + s("{}")),
    "wf_event": (WF_EVENT, s("orders") + s("o-1") + s("paid") + s(None)),
    "env_queue": (ENV_QUEUE, s("emails")),
    "queue_send": (QUEUE_SEND, s("emails") + s('"hi"') + i64(0)),
    "queue_batch": (QUEUE_BATCH, s("emails") + i64(5000) + u32(3) + s("1") +
                    s(None) + s("[2]")),
    "log": (LOG, u32(1) + s("charged o-1")),
    "cancelled": (CANCELLED, b""),
    "return": (RETURN, i64(0) + u32(1) + s('{"id":7}') + u32(0) + u32(0) +
               s(None)),
    "return_failed": (RETURN, i64(-1) + u32(0) + s(None) + u32(1) + u32(1) +
                      s("gave up")),
    "end": (END, i64(0) + s(None)),
    "end_marks": (END, i64(0) + s(None) + u32(2) + u32(1) + i64(0) + u32(2) +
                  i64(60000)),
    "limit": (LIMIT, u32(1) + i64(1200) + i64(1000)),
}

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                    "fuzz_worker_frame")
os.makedirs(here, exist_ok=True)
for name, (kind, body) in SEEDS.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(u32(kind) + body)
