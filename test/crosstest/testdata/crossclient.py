#!/usr/bin/python3
"""ThriftTest client on Apache's Python library, driven by cross_test.go.

Usage: crossclient.py GENDIR HOST CELL...
where CELL is PROTOCOL,TRANSPORT,SOCKET,ADDR: PROTOCOL one of binary,
compact, header, json, accel, accelc and their multiplexed forms multi,
multic, multih, multij, multia, multiac; TRANSPORT buffered, framed, zlib or
http; SOCKET ip, ip-ssl or domain; ADDR the port, or for domain the path.

GENDIR holds the code Debian's thrift compiler generated at test time for
ThriftTest.thrift. Every cell runs the same checks as Apache's Python test
client, each on a fresh connection, and prints "CELL <name> OK <n>" or
"CELL <name> FAIL <reason>"; the exit status is 1 when any cell failed.
One process runs many cells so the interpreter starts once.
"""

import ssl as SSL
import sys
import time
import traceback

sys.path.insert(0, sys.argv[1])

from thrift.Thrift import TApplicationException, TException  # noqa: E402
from thrift.protocol import (  # noqa: E402
    TBinaryProtocol,
    TCompactProtocol,
    THeaderProtocol,
    TJSONProtocol,
    TMultiplexedProtocol,
    TProtocol,
    TProtocolDecorator,
)
from thrift.transport import THttpClient, TSocket, TSSLSocket, TTransport, TZlibTransport  # noqa: E402

from ThriftTest import SecondService, ThriftTest  # noqa: E402
from ThriftTest.ttypes import (  # noqa: E402
    Insanity,
    Numberz,
    Xception,
    Xception2,
    Xtruct,
    Xtruct2,
)

FACTORIES = {
    "binary": lambda: TBinaryProtocol.TBinaryProtocolFactory(),
    "accel": lambda: TBinaryProtocol.TBinaryProtocolAcceleratedFactory(fallback=False),
    "compact": lambda: TCompactProtocol.TCompactProtocolFactory(),
    "accelc": lambda: TCompactProtocol.TCompactProtocolAcceleratedFactory(fallback=False),
    "header": lambda: THeaderProtocol.THeaderProtocolFactory(),
    "json": lambda: TJSONProtocol.TJSONProtocolFactory(),
}
MULTI = {"multi": "binary", "multia": "accel", "multic": "compact",
         "multiac": "accelc", "multih": "header", "multij": "json"}


class SeqIDCheck(TProtocolDecorator.TProtocolDecorator):
    """Fails a reply whose sequence id is not the request's."""

    sent = None  # shared by the ThriftTest and SecondService protocols

    def __init__(self, protocol):
        pass  # TProtocolDecorator.__new__ wraps protocol

    def writeMessageBegin(self, name, mtype, seqid):
        SeqIDCheck.sent = seqid
        super().writeMessageBegin(name, mtype, seqid)

    def readMessageBegin(self):
        name, mtype, seqid = super().readMessageBegin()
        if seqid != SeqIDCheck.sent:
            raise TProtocol.TProtocolException(
                TProtocol.TProtocolException.INVALID_DATA,
                "sent seqid %d, reply has %d" % (SeqIDCheck.sent, seqid))
        return name, mtype, seqid


class Checks:
    def __init__(self, client, second):
        self.c = client
        self.second = second
        self.n = 0

    def eq(self, what, want, got):
        if want != got:
            raise AssertionError("%s: want %r, got %r" % (what, want, got))
        self.n += 1

    def run(self):
        c = self.c
        c.testVoid()
        self.n += 1
        for s in ["Python" * 20, "", "\b\t\n/\\\\\r{}:パイソン\"",
                  "Afrikaans, العربية, Башҡорт, ᏣᎳᎩ, ⰔⰎⰑⰂⰡⰐⰠⰔⰍⰟ, 日本語, 한국어, ไทย, 粵語"]:
            self.eq("testString", s, c.testString(s))
        if self.second is not None:
            self.eq("secondtestString", 'testString("foobar")', self.second.secondtestString("foobar"))
        for b in (True, False):
            self.eq("testBool", b, c.testBool(b))
        for v in (63, -127):
            self.eq("testByte", v, c.testByte(v))
        for v in (-1, 0, 2147483647, -2147483648):
            self.eq("testI32", v, c.testI32(v))
        for v in (1, -34359738368, 2**63 - 1):
            self.eq("testI64", v, c.testI64(v))
        for v in (-5.235098235, 0, -1, -0.000341012439638598279):
            self.eq("testDouble", v, c.testDouble(v))
        self.eq("testBinary", bytes(range(256)), c.testBinary(bytes(range(256))))
        x = Xtruct(string_thing="Zero", byte_thing=1, i32_thing=-3, i64_thing=-5)
        self.eq("testStruct", x, c.testStruct(x))
        x2 = Xtruct2(struct_thing=x, byte_thing=0, i32_thing=0)
        self.eq("testNest", x2, c.testNest(x2))
        m = {0: 1, 1: 2, 2: 3, 3: 4, -1: -2}
        self.eq("testMap", m, c.testMap(m))
        sm = {"a": "2", "b": "blah", "some": "thing", "": "é"}
        self.eq("testStringMap", sm, c.testStringMap(sm))
        self.eq("testSet", {8, 1, 42}, c.testSet({8, 1, 42}))
        self.eq("testList", [1, 4, 9, -42], c.testList([1, 4, 9, -42]))
        self.eq("testEnum", Numberz.FIVE, c.testEnum(Numberz.FIVE))
        self.eq("testTypedef", 0xffffffffffffff, c.testTypedef(0xffffffffffffff))
        self.eq("testMapMap", {-4: {-4: -4, -3: -3, -2: -2, -1: -1}, 4: {4: 4, 3: 3, 2: 2, 1: 1}},
                c.testMapMap(42))
        arg = Insanity(userMap={Numberz.FIVE: 5, Numberz.EIGHT: 8},
                       xtructs=[Xtruct("Goodbye4", 4, 4, 4), Xtruct("Hello2", 2, 2, 2)])
        got = c.testInsanity(arg)
        self.eq("testInsanity[1]", {Numberz.TWO: arg, Numberz.THREE: arg}, got[1])
        empty = got[2][Numberz.SIX]
        self.eq("testInsanity[2]", (1, [], []), (len(got[2]), list(empty.userMap or {}), list(empty.xtructs or [])))
        want = Xtruct(string_thing="Hello2", byte_thing=74, i32_thing=0xff00ff, i64_thing=0xffffffffd0d0)
        self.eq("testMulti", want, c.testMulti(74, 0xff00ff, 0xffffffffd0d0, {0: "abc"}, Numberz.FIVE, 0xf0f0f0))
        self.exceptions()
        start = time.monotonic()
        c.testOneway(1)
        took = time.monotonic() - start
        if took >= 3:
            raise AssertionError("testOneway(1) took %.1fs: it waited for the handler" % took)
        self.n += 1
        self.eq("testString after testOneway", "Python", c.testString("Python"))

    def exceptions(self):
        c = self.c
        for arg in ("Safe", "success"):
            c.testException(arg)
            self.n += 1
        try:
            c.testException("Xception")
            raise AssertionError("testException(Xception) returned")
        except Xception as x:
            self.eq("testException(Xception)", (1001, "Xception"), (x.errorCode, x.message))
        try:
            c.testException("TException")
            raise AssertionError("testException(TException) returned")
        except TApplicationException:
            self.n += 1
        try:
            c.testMultiException("Xception", "ignore")
            raise AssertionError("testMultiException(Xception) returned")
        except Xception as x:
            self.eq("testMultiException(Xception)", (1001, "This is an Xception"), (x.errorCode, x.message))
        try:
            c.testMultiException("Xception2", "ignore")
            raise AssertionError("testMultiException(Xception2) returned")
        except Xception2 as x:
            self.eq("testMultiException(Xception2)", (2002, "This is an Xception2"),
                    (x.errorCode, x.struct_thing.string_thing))
        self.eq("testMultiException(success)", "foobar", c.testMultiException("success", "foobar").string_thing)


def run_cell(host, proto, trans, socket, addr):
    ssl = socket == "ip-ssl"
    if trans == "http":
        uri = "%s://%s:%s/" % ("https" if ssl else "http", host, addr)
        ctx = SSL._create_unverified_context() if ssl else None  # as Apache's test client
        transport = THttpClient.THttpClient(uri, ssl_context=ctx)
    else:
        if socket == "domain":
            sock = TSocket.TSocket(unix_socket=addr)
        elif ssl:
            sock = TSSLSocket.TSSLSocket(host, int(addr), validate=False)
        else:
            sock = TSocket.TSocket(host, int(addr))
        sock.setTimeout(30000)  # ms: a call fails instead of hanging
        transport = {
            "buffered": lambda: TTransport.TBufferedTransport(sock),
            "framed": lambda: TTransport.TFramedTransport(sock),
            "zlib": lambda: TZlibTransport.TZlibTransport(TTransport.TBufferedTransport(sock), 9),
        }[trans]()
    base = MULTI.get(proto, proto)
    factory = FACTORIES[base]()

    def protocol(service):
        p = SeqIDCheck(factory.getProtocol(transport))
        if proto in MULTI:
            p = TMultiplexedProtocol.TMultiplexedProtocol(p, service)
        return p

    transport.open()
    try:
        second = SecondService.Client(protocol("SecondService")) if proto in MULTI else None
        checks = Checks(ThriftTest.Client(protocol("ThriftTest")), second)
        checks.run()
        return checks.n
    finally:
        transport.close()


def main():
    host = sys.argv[2]
    failed = False
    for cell in sys.argv[3:]:
        proto, trans, socket, addr = cell.split(",")
        name = "%s-%s-%s" % (proto, trans, socket)
        try:
            n = run_cell(host, proto, trans, socket, addr)
            print("CELL %s OK %d" % (name, n), flush=True)
        except Exception as e:  # a failed cell must not hide the others
            failed = True
            print("CELL %s FAIL %s" % (name, repr(e).replace("\n", " ")), flush=True)
            traceback.print_exc()
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
