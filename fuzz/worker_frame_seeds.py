#!/usr/bin/env python3
"""Writes fuzz_worker_frame's seeds into fuzz/corpus/fuzz_worker_frame/:
valid frames of several kinds as a worker writes them (worker_api.c), and
of the engine's five as it writes them (worker_proxy.c), each its u32 kind
then its body, in host byte order (little-endian here).
Kinds and fields are worker_proto.h's."""

import os
import struct

RUN, CALL, REPLY, QUEUE_RUN, CRON_RUN = 1, 2, 3, 4, 5
DO, SLEEP, SLEEP_UNTIL, WAIT = 16, 17, 18, 19
STEP_ERROR, SET_OUTPUT, FAIL, ERROR_IS = 20, 21, 22, 23
ENV_WORKFLOW, WF_CREATE, WF_EVENT, ENV_QUEUE = 24, 25, 26, 27
QUEUE_SEND, QUEUE_BATCH, LOG, CANCELLED = 28, 29, 30, 31
WAIT_ANY, CHILD_START, CHILD_WAIT = 32, 33, 34
RETURN, END, LIMIT = 35, 36, 38


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
    "wait_any": (WAIT_ANY, s("review") + u32(2) + u32(1) + s("approve") +
                 s("reject") + i64(1767398400000) + u32(1)),
    "wait_any_no_types": (WAIT_ANY, s("review") + u32(3) + u32(0) + i64(0) +
                          u32(0)),
    "child_start": (CHILD_START, s("part 1") + s("PART") + s(None) +
                    s('{"i":1}') + u32(0) + u32(1)),
    "child_wait": (CHILD_WAIT, s("part done") + s("PART") + s("p-1") + u32(1)),
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
    "run": (RUN, s("orders") + s("/b/ab12.so") + s("ab12") + s("Checkout") +
            s("checkout") + s("o-1") + s('{"total":42}') + i64(1765000000000)),
    "call": (CALL, u64(0x401000) + u64(0) + u32(1) + i64(1765000030000) +
             s("o-1/charge#1") + u64(7) + i64(123456)),
    "reply": (REPLY, i64(0) + s('{"id":7}')),
    "reply_null": (REPLY, i64(-4) + s(None)),
    "queue_run": (QUEUE_RUN, s("mailer") + s("/b/cd34.so") + s("cd34") +
                  s("emails") + u32(2) + i64(1) + s('"hi"') + u32(1) +
                  i64(1765000000000) + i64(2) + s(None) + u32(3) +
                  i64(1765000000001)),
    "cron_run": (CRON_RUN, s("reports") + s("/b/ef56.so") + s("ef56") +
                 s("0 9 * * 1") + i64(1765184400000) + s("Europe/Paris")),
}

here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus",
                    "fuzz_worker_frame")
os.makedirs(here, exist_ok=True)
for name, (kind, body) in SEEDS.items():
    with open(os.path.join(here, name), "wb") as f:
        f.write(u32(kind) + body)
