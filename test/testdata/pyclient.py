#!/usr/bin/python3
"""Interop client for the Interop service, driven by the Go tests.

Usage: pyclient.py GENDIR HOST PORT {framed|buffered}[-zlib]|http {binary|compact|json|header}

(the stack: pystack.py; http posts every call to http://HOST:PORT/ with
Apache's THttpClient).

GENDIR holds the code Debian's thrift compiler generated at test time
(`thrift --gen py`). Every check raises on mismatch; the last line printed
is "OK <n>" with the number of checks, which the Go test asserts on, so a
silently skipped check cannot pass.
"""

import sys
import time

sys.path.insert(0, sys.argv[1])

from thrift.Thrift import TApplicationException  # noqa: E402
from pystack import open_stack  # noqa: E402

from interop import Interop  # noqa: E402
from interop.ttypes import (  # noqa: E402
    AllTypes,
    Color,
    Inner,
    InteropError,
    OtherError,
)

checks = 0


def check(cond, what):
    global checks
    if not cond:
        raise AssertionError(what)
    checks += 1


def sample():
    return AllTypes(
        b=True,
        i8v=-128,
        i16v=-32768,
        i32v=-2147483648,
        i64v=9223372036854775807,
        d=-1.5e300,
        s="héllo, wörld ✓",
        bin=bytes(range(256)),
        color=Color.BLUE,
        ints=[0, -1, 1, 2147483647],
        strs={"a", "b", ""},
        m={"x": -1, "y": 1 << 40},
        inners=[Inner(id=1, name="one"), Inner(id=2, name="two")],
        nested={7: ["p", "q"], -7: []},
        opt="present",
        inner=Inner(id=3, name="three"),
        bools=[True, False, True],
        byName={"k": Inner(id=4, name="four")},
    )


def main():
    _, _, host, port, framing, protocol = sys.argv
    _, trans, proto = open_stack(host, port, framing, protocol)
    # Python's TJSONProtocol reads byte by byte in Python: 16 MiB in
    # base64 would take minutes, so JSON sends a smaller big binary.
    big = 256 << 10 if protocol == "json" else 16 << 20
    client = Interop.Client(proto)
    trans.open()
    try:
        run(client, big)
    finally:
        trans.close()
    print("OK %d" % checks)


def run(client, size):
    client.ping()
    check(True, "ping")

    v = sample()
    got = client.echoAll(v)
    check(got == v, "echoAll: %r != %r" % (got, v))

    # Unset optional and default-less fields must stay unset through the trip.
    sparse = AllTypes(i32v=5)
    got = client.echoAll(sparse)
    check(got.i32v == 5 and got.opt is None, "echoAll sparse: %r" % (got,))

    check(client.echoString("") == "", "empty string")
    check(client.echoString("ünïcode") == "ünïcode", "unicode string")
    check(client.add(2, 40) == 42, "add")
    check(client.add(-2147483648, -(1 << 62)) == -2147483648 - (1 << 62),
          "add extremes")

    big = bytes((i * 7 + 3) & 0xFF for i in range(size))
    got = client.echoBinary(big)
    check(got == big, "%d-byte binary (len %d)" % (size, len(got)))
    check(client.echoBinary(b"") == b"", "empty binary")

    check(client.mayFail(0) == 42, "mayFail(0)")
    try:
        client.mayFail(1)
        check(False, "mayFail(1) did not raise")
    except InteropError as e:
        check(e.code == 1 and e.message == "boom", "InteropError %r" % (e,))
    try:
        client.mayFail(2)
        check(False, "mayFail(2) did not raise")
    except OtherError as e:
        check(e.reason == "other", "OtherError %r" % (e,))
    try:
        client.mayFail(3)
        check(False, "mayFail(3) did not raise")
    except TApplicationException as e:
        check(e.type == TApplicationException.INTERNAL_ERROR,
              "application exception type %d" % e.type)

    # The connection must still be usable after every kind of exception.
    check(client.add(1, 1) == 2, "call after exceptions")

    sent = ["n1", "n2", "n3"]
    for n in sent:
        client.notify(n)
    # Oneway calls may be handled concurrently with later calls, so poll.
    seen = []
    deadline = time.time() + 10
    while sorted(seen) != sorted(sent) and time.time() < deadline:
        seen.extend(client.drainNotes())
        if sorted(seen) != sorted(sent):
            time.sleep(0.01)
    check(sorted(seen) == sorted(sent), "oneway notes %r" % (seen,))


if __name__ == "__main__":
    main()
