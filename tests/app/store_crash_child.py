"""Helper process for tests/app/test_store.py (not a test module).

usage:
  store_crash_child.py crash  DB ROUND
      Creates conversation "round ROUND", appends FINISHED messages (all 'done'),
      prints "READY <conversation id>", then appends one 'streaming' assistant reply
      and rewrites it forever with partial_reply(i) for i = 1, 2, ..., printing
      "U <i>" after each committed update.  The test SIGKILLs it mid-loop.
  store_crash_child.py writer DB CONV_ID TAG N
      Prints "READY", waits for a line on stdin, then appends N user messages
      "<TAG>-<i>" to conversation CONV_ID (one short transaction each) and, every
      10 messages, streams a small reply to completion; prints "DONE".
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.store import ConversationStore  # noqa: E402


def finished_messages(round_no: int) -> list[tuple[str, str]]:
    return [
        ("system", f"round {round_no}: be brief"),
        ("user", f"round {round_no}: hello \N{WAVING HAND SIGN}"),
        ("assistant", f"round {round_no}: hi! how can I help?"),
        ("user", f"round {round_no}: tell me a story"),
    ]


def partial_reply(i: int) -> str:
    return "".join(f"tok{j} " for j in range(i))


def crash(db: str, round_no: int) -> None:
    store = ConversationStore(db)
    conv = store.create_conversation(f"round {round_no}")
    for role, content in finished_messages(round_no):
        store.append_message(conv.id, role, content)
    print(f"READY {conv.id}", flush=True)
    reply = store.append_message(conv.id, "assistant", "", status="streaming")
    deadline = time.monotonic() + 60  # never outlive a broken test for long
    i = 0
    while time.monotonic() < deadline:
        i += 1
        store.update_message(reply.id, partial_reply(i))
        print(f"U {i}", flush=True)
    sys.exit(3)


def writer(db: str, conv_id: int, tag: str, n: int) -> None:
    store = ConversationStore(db)
    print("READY", flush=True)
    sys.stdin.readline()
    for i in range(n):
        store.append_message(conv_id, "user", f"{tag}-{i}")
        if i % 10 == 9:
            reply = store.append_message(conv_id, "assistant", "", status="streaming",
                                         meta={"writer": tag})
            for k in range(3):
                store.update_message(reply.id, f"{tag} reply " + "x" * k)
            store.finish_message(reply.id, "done")
        time.sleep(0.001)  # let the other writer in
    store.close()
    print("DONE", flush=True)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "crash":
        crash(sys.argv[2], int(sys.argv[3]))
    elif mode == "writer":
        writer(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]))
    else:
        sys.exit(f"unknown mode {mode!r}")
