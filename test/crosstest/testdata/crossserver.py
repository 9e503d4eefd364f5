#!/usr/bin/python3
"""ThriftTest servers on Apache's Python library, driven by cross_test.go.

Usage: crossserver.py GENDIR CERTFILE CELL...
where CELL is PROTOCOL,TRANSPORT,SOCKET[,PATH] (CERTFILE holds the server's
key and certificate in PEM; PATH is the unix socket of a domain cell),
PROTOCOL, TRANSPORT and SOCKET as in crossclient.py.

Each cell gets its own TSimpleServer (one connection at a time, messages in
order, as Apache's test servers; THttpServer for http) on a free loopback
port or its unix socket, in a thread; the
script prints "LISTENING <cell> <port or path>" for each, then serves until its
standard input closes. The handler has the semantics of Apache's Python test
server (test/py/TestServer.py): echoes, Apache's exceptions and fixed
shapes, testOneway sleeping a third of its argument.
"""

import sys
import threading
import time

sys.path.insert(0, sys.argv[1])

from thrift.Thrift import TException  # noqa: E402
from thrift.protocol import (  # noqa: E402
    TBinaryProtocol,
    TCompactProtocol,
    THeaderProtocol,
    TJSONProtocol,
)
from thrift.server import THttpServer, TServer  # noqa: E402
from thrift.TMultiplexedProcessor import TMultiplexedProcessor  # noqa: E402
from thrift.transport import THeaderTransport, TSocket, TSSLSocket, TTransport, TZlibTransport  # noqa: E402

from ThriftTest import SecondService, ThriftTest  # noqa: E402
from ThriftTest.ttypes import Insanity, Xception, Xception2, Xtruct  # noqa: E402

HEADER_CLIENTS = [
    THeaderTransport.THeaderClientType.HEADERS,
    THeaderTransport.THeaderClientType.FRAMED_BINARY,
    THeaderTransport.THeaderClientType.UNFRAMED_BINARY,
    THeaderTransport.THeaderClientType.FRAMED_COMPACT,
    THeaderTransport.THeaderClientType.UNFRAMED_COMPACT,
]
FACTORIES = {
    "binary": lambda: TBinaryProtocol.TBinaryProtocolFactory(),
    "accel": lambda: TBinaryProtocol.TBinaryProtocolAcceleratedFactory(),
    "compact": lambda: TCompactProtocol.TCompactProtocolFactory(),
    "accelc": lambda: TCompactProtocol.TCompactProtocolAcceleratedFactory(),
    "header": lambda: THeaderProtocol.THeaderProtocolFactory(HEADER_CLIENTS),
    "json": lambda: TJSONProtocol.TJSONProtocolFactory(),
}
MULTI = {"multi": "binary", "multia": "accel", "multic": "compact",
         "multiac": "accelc", "multih": "header", "multij": "json"}


def echo(self, thing):
    return thing


class Handler:
    testString = testBool = testByte = testI32 = testI64 = echo
    testDouble = testBinary = testStruct = testNest = testMap = echo
    testStringMap = testSet = testList = testEnum = testTypedef = echo

    def testVoid(self):
        pass

    def testMapMap(self, hello):
        return {-4: {-4: -4, -3: -3, -2: -2, -1: -1}, 4: {4: 4, 3: 3, 2: 2, 1: 1}}

    def testInsanity(self, argument):
        return {1: {2: argument, 3: argument}, 2: {6: Insanity()}}

    def testMulti(self, arg0, arg1, arg2, arg3, arg4, arg5):
        return Xtruct(string_thing="Hello2", byte_thing=arg0, i32_thing=arg1, i64_thing=arg2)

    def testException(self, arg):
        if arg == "Xception":
            raise Xception(errorCode=1001, message=arg)
        if arg == "TException":
            raise TException(message="This is a TException")

    def testMultiException(self, arg0, arg1):
        if arg0 == "Xception":
            raise Xception(errorCode=1001, message="This is an Xception")
        if arg0 == "Xception2":
            raise Xception2(errorCode=2002, struct_thing=Xtruct(string_thing="This is an Xception2"))
        return Xtruct(string_thing=arg1)

    def testOneway(self, seconds):
        time.sleep(seconds / 3)


class Second:
    def secondtestString(self, thing):
        return 'testString("%s")' % thing


def start(cell, certfile):
    proto, trans, socket = cell.split(",")[:3]
    processor = ThriftTest.Processor(Handler())
    if proto in MULTI:
        mux = TMultiplexedProcessor()
        mux.registerDefault(processor)
        mux.registerProcessor("ThriftTest", processor)
        mux.registerProcessor("SecondService", SecondService.Processor(Second()))
        processor = mux
    pfactory = FACTORIES[MULTI.get(proto, proto)]()
    ssl = socket == "ip-ssl"
    if trans == "http":
        keys = {"cert_file": certfile, "key_file": certfile} if ssl else {}
        server = THttpServer.THttpServer(processor, ("127.0.0.1", 0), pfactory, **keys)
        where = server.httpd.server_address[1]
    else:
        if socket == "domain":
            where = cell.split(",")[3]
            sock = TSocket.TServerSocket(unix_socket=where)
        elif ssl:
            sock = TSSLSocket.TSSLServerSocket("127.0.0.1", 0, certfile=certfile)
        else:
            sock = TSocket.TServerSocket("127.0.0.1", 0)
        sock.listen()
        if socket != "domain":
            where = sock.handle.getsockname()[1]
        # TSimpleServer.serve listens again, which would bind a new port 0.
        sock.listen = lambda: None
        tfactory = {"buffered": TTransport.TBufferedTransportFactory(),
                    "framed": TTransport.TFramedTransportFactory(),
                    "zlib": TZlibTransport.TZlibTransportFactory()}[trans]
        server = TServer.TSimpleServer(processor, sock, tfactory, pfactory)
    threading.Thread(target=server.serve, daemon=True).start()
    print("LISTENING %s-%s-%s %s" % (proto, trans, socket, where), flush=True)


def main():
    for cell in sys.argv[3:]:
        start(cell, sys.argv[2])
    sys.stdin.read()  # serve until the test closes stdin or kills us


if __name__ == "__main__":
    main()
