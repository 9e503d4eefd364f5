#!/usr/bin/python3
"""Interop server on Apache's Python library, driven by the Go tests.

Usage: pyserver.py GENDIR {framed|buffered} {binary|compact}

Serves the Interop service with the reference behaviour (test/testutil's
ApacheHandler) on a TSimpleServer bound to a free loopback port, prints
"LISTENING <port>" once it accepts connections, and serves until killed.
GENDIR holds the code Debian's thrift compiler generated at test time.
"""

import sys
import time

sys.path.insert(0, sys.argv[1])

from thrift.protocol import TBinaryProtocol, TCompactProtocol  # noqa: E402
from thrift.server import TServer  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402

from interop import Interop  # noqa: E402
from interop.ttypes import InteropError, OtherError  # noqa: E402


class Handler:
    def __init__(self):
        self.notes = []

    def ping(self):
        pass

    def echoAll(self, v):
        return v

    def echoBinary(self, data):
        return data

    def echoString(self, s):
        return s

    def add(self, a, b):
        return a + b

    def mayFail(self, code):
        if code == 0:
            return 42
        if code == 1:
            raise InteropError(code=1, message="boom")
        if code == 2:
            raise OtherError(reason="other")
        # Undeclared: the generated processor answers INTERNAL_ERROR.
        raise RuntimeError("undeclared failure")

    def notify(self, msg):
        self.notes.append(msg)

    def drainNotes(self):
        out, self.notes = self.notes, []
        return out

    def sleep(self, ms):
        time.sleep(ms / 1000.0)
        return ms


def main():
    framing, protocol = sys.argv[2], sys.argv[3]
    sock = TSocket.TServerSocket(host="127.0.0.1", port=0)
    sock.listen()
    port = sock.handle.getsockname()[1]
    sock.listen = lambda: None  # serve() listens again; keep this socket
    if framing == "framed":
        tf = TTransport.TFramedTransportFactory()
    else:
        tf = TTransport.TBufferedTransportFactory()
    if protocol == "compact":
        pf = TCompactProtocol.TCompactProtocolFactory()
    else:
        pf = TBinaryProtocol.TBinaryProtocolFactory()
    server = TServer.TSimpleServer(Interop.Processor(Handler()), sock, tf, pf)
    print("LISTENING", port, flush=True)
    server.serve()


main()
