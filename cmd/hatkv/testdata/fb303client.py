#!/usr/bin/python3
"""fb303 client for `hatkv serve`, driven by the Go test TestFB303Python.

Usage: fb303client.py GENDIR HOST PORT {framed|buffered}

GENDIR holds the code Debian's thrift compiler generated at test time from
pkg/fb303/fb303.thrift (`thrift --gen py`). Prints one line per answer,
"NAME value", which the Go test asserts on.
"""

import sys

sys.path.insert(0, sys.argv[1])

from thrift.protocol import TBinaryProtocol  # noqa: E402
from thrift.transport import TSocket, TTransport  # noqa: E402

from fb303 import FacebookService  # noqa: E402
from fb303.ttypes import fb_status  # noqa: E402

sock = TSocket.TSocket(sys.argv[2], int(sys.argv[3]))
sock.setTimeout(30000)
if sys.argv[4] == "framed":
    trans = TTransport.TFramedTransport(sock)
else:
    trans = TTransport.TBufferedTransport(sock)
client = FacebookService.Client(TBinaryProtocol.TBinaryProtocol(trans))
trans.open()
print("status", fb_status._VALUES_TO_NAMES[client.getStatus()])
print("details", client.getStatusDetails())
print("name", client.getName())
print("alive_since", client.aliveSince())
counters = client.getCounters()
print("calls", counters["hatrpc_server_calls_total"])
print("connections", counters["hatrpc_server_connections"])
print("transport", client.getOption("transport"))
trans.close()
