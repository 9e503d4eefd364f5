#!/usr/bin/env python3
"""Instructions a call from two callgrind profiles of one build.

usage: insn-per-call.py SHORT.out LONG.out CALLS [TOP]

SHORT and LONG are runs of internal/bench/insn that differ only in calls
per caller; CALLS is the difference in calls (all callers). Setup and
teardown cancel out: what is left is each function's own (self)
instructions a call, summed by part of the program. Only self costs are
used: goroutine switches confuse callgrind's call stacks, so its
inclusive costs are not meaningful for Go.
"""
import re
import subprocess
import sys

PARTS = [
    ("gc", r"^runtime\.(scan|gc|mark|tryDefer|findObject|greyobject|pcvalue|step|funcInfo|findfunc|\(\*unwinder\)|sweep|\(\*mspan\)|\(\*gcWork\)|\(\*sweep|bgsweep|bgscav|wbBuf|spanOf|heapBits|\(\*gcBits|typePointers|\(\*mheap|freeDeadSpan)"),
    ("malloc", r"^runtime\.(malloc|newobject|nextFree|\(\*mcache\)|makeslice|growslice|memclr|\(\*mcentral)"),
    ("memmove", r"^runtime\.memmove"),
    ("scheduler, channels, clock", r"^runtime\."),
    ("sync (pools, locks)", r"^(sync|internal/sync)\."),
    ("syscall glue", r"^(syscall|internal/poll|net)\."),
    ("bufio, io", r"^(bufio|io)\."),
    ("server", r"/pkg/server\."),
    ("client", r"/pkg/client\."),
    ("wire (framing)", r"/pkg/wire\."),
    ("proto (Thrift)", r"/pkg/proto\."),
    ("metadata", r"/pkg/metadata\."),
    ("generated code, harness", r"internal/bench|^main\."),
]


def self_costs(path):
    out = subprocess.run(["callgrind_annotate", "--threshold=100", path],
                         capture_output=True, text=True, check=True).stdout
    costs = {}
    for line in out.splitlines():
        m = re.match(r"\s*([\d,]+) \([^)]*\)\s+\S+:(\S+)", line)
        if m:
            fn = re.sub(r"'\d+$", "", m.group(2))  # recursion marks
            costs[fn] = costs.get(fn, 0) + int(m.group(1).replace(",", ""))
    return costs


def main():
    short, long_, calls = sys.argv[1], sys.argv[2], float(sys.argv[3])
    top = int(sys.argv[4]) if len(sys.argv) > 4 else 15
    a, b = self_costs(short), self_costs(long_)
    per = {k: (b.get(k, 0) - a.get(k, 0)) / calls for k in set(a) | set(b)}
    parts = {}
    for fn, v in per.items():
        name = next((n for n, r in PARTS if re.search(r, fn)), "other")
        parts[name] = parts.get(name, 0) + v
    print("instructions a call: %.0f" % sum(per.values()))
    for name, v in sorted(parts.items(), key=lambda x: -x[1]):
        print("  %7.0f  %s" % (v, name))
    print("top functions (self):")
    for fn, v in sorted(per.items(), key=lambda x: -x[1])[:top]:
        print("  %7.0f  %s" % (v, fn))


if __name__ == "__main__":
    main()
