"""The Apache Python transport stack the test scripts open (pyclient.py,
pyorder.py), named by the words the Go tests pass.

framing: framed or buffered, with "-zlib" Apache's TZlibTransport (level
9) around it, as Apache's TestClient.py --zlib; or http (THttpClient to
http://HOST:PORT/, one POST a call). protocol: binary, compact, json, or
header (THeaderProtocol, binary inside; over "framed", each THeader frame
inside one more frame).
"""

from thrift.protocol import TBinaryProtocol, TCompactProtocol, THeaderProtocol, TJSONProtocol
from thrift.transport import THeaderTransport, THttpClient, TSocket, TTransport, TZlibTransport


def open_stack(host, port, framing, protocol):
    """Returns (socket, transport, protocol), the transport not yet open
    (socket None over http)."""
    sock = None
    if framing == "http":
        trans = THttpClient.THttpClient("http://%s:%s/" % (host, port))
        trans.setTimeout(20000)
        trans.setCustomHeaders({"X-Client": "python"})
    else:
        sock = TSocket.TSocket(host, int(port))
        sock.setTimeout(20000)  # ms: a call fails instead of hanging
        if framing.startswith("framed"):
            trans = TTransport.TFramedTransport(sock)
        else:
            trans = TTransport.TBufferedTransport(sock)
    if framing.endswith("-zlib"):
        trans = TZlibTransport.TZlibTransport(trans, 9)
    if protocol == "binary":
        proto = TBinaryProtocol.TBinaryProtocol(trans)
    elif protocol == "json":
        proto = TJSONProtocol.TJSONProtocol(trans)
    elif protocol == "header":
        proto = THeaderProtocol.THeaderProtocol(
            trans, [THeaderTransport.THeaderClientType.HEADERS])
    else:
        proto = TCompactProtocol.TCompactProtocol(trans)
    return sock, trans, proto
