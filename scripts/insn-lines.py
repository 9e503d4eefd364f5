#!/usr/bin/env python3
"""Code a call from two callgrind profiles of one side (--dump-instr=yes
--cache-sim=yes).

usage: insn-lines.py SHORT.out LONG.out CALLS [TOP]

SHORT and LONG differ only in calls (CALLS more in LONG), so setup
cancels. Prints the user-space instructions a call, the simulated
level-1 instruction-cache misses a call, and the code a call touches:
the 64-byte lines whose instructions ran at least once a call on
average (a line run in every call qualifies; one run once a burst of
ten does not), in KiB. The last is what has to fit in the 32 KiB cache
beside everything else a call runs. With TOP, the TOP functions with
the most of those lines follow.
"""
import collections
import re
import sys


def per_address(path):
    """Ir and I1mr by instruction address (self costs, not calls')."""
    ir, mr = collections.Counter(), collections.Counter()
    fn_of = {}  # address -> function
    fn = "?"
    last, skip, npos, ei, mi = 0, False, 1, 0, 0
    with open(path) as f:
        for line in f:
            if line.startswith("events:"):
                evs = line.split()[1:]
                ei, mi = evs.index("Ir"), evs.index("I1mr")
                continue
            if line.startswith("positions:"):
                npos = len(line.split()) - 1
                if line.split()[1] != "instr":
                    sys.exit("insn-lines: %s was not recorded with --dump-instr=yes" % path)
                continue
            if line.startswith(("fn=", "cfn=")):
                # "fn=(id) name" names id on its first use, in either.
                ref = line.strip().split("=", 1)[1]
                if ") " in ref:
                    i = ref.index(") ") + 1
                    names[ref[:i]] = ref[i + 1:]
                name = re.sub(r"'\d+$", "", names.get(ref.split(" ")[0], ref))
                if line[0] == "f":
                    fn = name
                continue
            if line.startswith("calls="):
                skip = True  # the next cost line is the call's, inclusive
                continue
            if not line or line[0] not in "0123456789+-*":
                continue
            t = line.split()
            a = t[0]
            if a.startswith("0x"):
                addr = int(a, 16)
            elif a[0] == "+":
                addr = last + int(a[1:], 0)
            elif a[0] == "-":
                addr = last - int(a[1:], 0)
            elif a == "*":
                addr = last
            else:
                addr = int(a, 0)
            last = addr
            if skip:
                skip = False
                continue
            v = t[npos:]
            if len(v) > ei:
                ir[addr] += int(v[ei])
                fn_of[addr] = fn
            if len(v) > mi:
                mr[addr] += int(v[mi])
    return ir, mr, fn_of


names = {}  # callgrind's "(id)" -> function name


def main():
    (ir_a, mr_a, _), (ir_b, mr_b, fn_of) = per_address(sys.argv[1]), per_address(sys.argv[2])
    calls = float(sys.argv[3])
    lines = collections.Counter()
    for addr in set(ir_a) | set(ir_b):
        lines[addr >> 6] += ir_b.get(addr, 0) - ir_a.get(addr, 0)
    instr = sum(lines.values()) / calls
    misses = (sum(mr_b.values()) - sum(mr_a.values())) / calls
    hot = sum(1 for v in lines.values() if v >= calls)
    print("instructions a call %.0f, L1i misses a call %.1f, code touched a call %.1f KiB (%d lines)"
          % (instr, misses, hot * 64 / 1024, hot))
    if len(sys.argv) > 4:
        by_fn = collections.Counter()
        for addr in set(ir_b):
            if lines[addr >> 6] >= calls:
                by_fn[(fn_of.get(addr, "?"), addr >> 6)] = 1
        per = collections.Counter()
        for (f, _), _ in by_fn.items():
            per[f] += 1
        for f, n in per.most_common(int(sys.argv[4])):
            print("  %5.2f KiB  %s" % (n * 64 / 1024, f))


if __name__ == "__main__":
    main()
