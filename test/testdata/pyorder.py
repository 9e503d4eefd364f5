#!/usr/bin/python3
"""Per-connection order through Apache's Python client, driven by the Go tests.

Usage: pyorder.py GENDIR HOST PORT {framed|buffered}[-zlib] {binary|compact|header} ROUNDS

(the stack: pystack.py).

Each round sends the oneway notify("5"), notify("6") and then the call
drainNotes() on one connection, and checks that it returns both notes in
order: the server ran the oneway calls, in order, before the call. The
last line printed is "OK <rounds>".
"""

import socket
import sys

sys.path.insert(0, sys.argv[1])

from pystack import open_stack  # noqa: E402

from interop import Interop  # noqa: E402


def main():
    _, _, host, port, framing, protocol, rounds = sys.argv
    sock, trans, proto = open_stack(host, port, framing, protocol)
    client = Interop.Client(proto)
    trans.open()
    # Two oneway writes and then a read: with Nagle on, the second write
    # waits for the server's delayed ack (~40 ms a round).
    sock.handle.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        for i in range(int(rounds)):
            client.notify("5")
            client.notify("6")
            got = client.drainNotes()
            if got != ["5", "6"]:
                raise AssertionError("round %d: drainNotes() = %r" % (i, got))
    finally:
        trans.close()
    print("OK %s" % rounds)


main()
