#!/usr/bin/python3
"""Per-connection order through Apache's Python client, driven by the Go tests.

Usage: pyorder.py GENDIR HOST PORT {framed|buffered}[-zlib] {binary|compact|header} ROUNDS {notes|pokes}

(the stack: pystack.py).

Each round sends two oneway calls and then a call on one connection, and
checks that the call finds both oneway calls done, in order:
notes: notify("5"), notify("6"), drainNotes() must return ["5", "6"]
(the Interop service); pokes: poke(5), poke(6), pokes() must return 11
(the Pokes service). The first wrong answer ends the run with status 1
and "FAIL round <n>: ..." on stderr; otherwise the last line printed is
"OK <rounds>".
"""

import socket
import sys

sys.path.insert(0, sys.argv[1])

from pystack import open_stack  # noqa: E402

from interop import Interop  # noqa: E402
from pokes import Pokes  # noqa: E402


def notes_round(client):
    client.notify("5")
    client.notify("6")
    got = client.drainNotes()
    return got == ["5", "6"], "drainNotes() = %r, want ['5', '6']" % (got,)


def pokes_round(client):
    client.poke(5)
    client.poke(6)
    got = client.pokes()
    return got == 11, "pokes() = %r, want 11" % (got,)


CASES = {"notes": (Interop.Client, notes_round), "pokes": (Pokes.Client, pokes_round)}


def main():
    _, _, host, port, framing, protocol, rounds, case = sys.argv
    new_client, run_round = CASES[case]
    sock, trans, proto = open_stack(host, port, framing, protocol)
    client = new_client(proto)
    trans.open()
    # Two oneway writes and then a read: with Nagle on, the second write
    # waits for the server's delayed ack (~40 ms a round).
    sock.handle.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        for i in range(int(rounds)):
            ok, what = run_round(client)
            if not ok:
                print("FAIL round %d: %s" % (i, what), file=sys.stderr)
                sys.exit(1)
    finally:
        trans.close()
    print("OK %s" % rounds)


main()
