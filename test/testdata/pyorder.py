#!/usr/bin/python3
"""Per-connection order through Apache's Python client, driven by the Go tests.

Usage: pyorder.py GENDIR HOST PORT {framed|buffered} {binary|compact|header} ROUNDS

Each round sends the oneway notify("5"), notify("6") and then the call
drainNotes() on one connection, and checks that it returns both notes in
order: the server ran the oneway calls, in order, before the call. The
last line printed is "OK <rounds>".
"""

import socket
import sys

sys.path.insert(0, sys.argv[1])

from thrift.protocol import TBinaryProtocol, TCompactProtocol, THeaderProtocol  # noqa: E402
from thrift.transport import THeaderTransport, TSocket, TTransport  # noqa: E402

from interop import Interop  # noqa: E402


def main():
    _, _, host, port, framing, protocol, rounds = sys.argv
    sock = TSocket.TSocket(host, int(port))
    sock.setTimeout(20000)  # ms: a call fails instead of hanging
    if framing == "framed":
        trans = TTransport.TFramedTransport(sock)
    else:
        trans = TTransport.TBufferedTransport(sock)
    if protocol == "binary":
        proto = TBinaryProtocol.TBinaryProtocol(trans)
    elif protocol == "header":
        proto = THeaderProtocol.THeaderProtocol(
            trans, [THeaderTransport.THeaderClientType.HEADERS])
    else:
        proto = TCompactProtocol.TCompactProtocol(trans)
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
