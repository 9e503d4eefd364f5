"""Runs the 22 TPC-H queries through a standard HiveServer2 client (impyla
or PyHive, over their default NOSASL binary transport) and checks each
answer against the published answers of DuckDB's tpch extension.

Usage: hs2_check.py --client impyla|pyhive --host H --port P --reference FILE
                   [--user U --password P] [--http] [--smoke]
                   [--expect-refused TEXT]
where FILE is `tpch reference --sf SF`'s JSON: the queries and the
published answers of the DuckDB the server runs. With --user the client
authenticates with SASL PLAIN (impyla auth_mechanism='PLAIN', PyHive
auth='CUSTOM'). With --http the client speaks Thrift over HTTP (impyla
use_http_transport, PyHive scheme='http'), with --user as HTTP Basic
credentials (impyla auth_mechanism='PLAIN', PyHive auth='BASIC'),
instead of the binary socket. With --smoke one query (the rows of
nation) instead of the 22. With --expect-refused the connection or its
first statement must fail with an error whose text contains TEXT.
Prints one line per query and ends with "N passed, M failed"; exits 1 on
any failure.
"""
import argparse
import json
import sys


def published(path):
    """The queries and answers, indexed 1..22; an answer is its rows, each
    a list of cells as the extension prints them (header line dropped)."""
    with open(path) as f:
        ref = json.load(f)
    answers = {}
    for nr in range(1, 23):
        text = ref["answers"][nr]
        lines = text[:-1].split("\n") if text.endswith("\n") else text.split("\n")
        answers[nr] = [line.split("|") for line in lines[1:]]
    return ref["queries"], answers


def same(got, want):
    """Cells as the answers print them: NULL as nothing, numbers within a
    relative 1e-9."""
    want = want.strip()
    if got is None:
        return want == ""
    g = str(got).strip()
    if g == want:
        return True
    try:
        gf, wf = float(g), float(want)
    except ValueError:
        return False
    return abs(gf - wf) <= 1e-9 * max(1.0, abs(wf))


def compare(rows, want):
    if len(rows) != len(want):
        return "%d rows, want %d" % (len(rows), len(want))
    for r, (got_row, want_row) in enumerate(zip(rows, want)):
        if len(got_row) != len(want_row):
            return "row %d: %d cells, want %d" % (r, len(got_row), len(want_row))
        for c, (g, w) in enumerate(zip(got_row, want_row)):
            if not same(g, w):
                return "row %d column %d: %r, want %r" % (r, c, g, w)
    return None


def connect(client, host, port, user, password, http=False):
    if http:
        if client == "impyla":
            from impala.dbapi import connect as impyla_connect

            if user is None:
                return impyla_connect(host=host, port=port, auth_mechanism="NOSASL", timeout=120,
                                      use_http_transport=True, http_path="cliservice")
            return impyla_connect(host=host, port=port, auth_mechanism="PLAIN", user=user, password=password,
                                  timeout=120, use_http_transport=True, http_path="cliservice")
        from pyhive import hive
        from thrift.transport import THttpClient

        record_transports(THttpClient)
        if user is None:
            return hive.connect(thrift_transport=THttpClient.THttpClient("http://%s:%d/cliservice" % (host, port)))
        return hive.connect(host=host, port=port, scheme="http", auth="BASIC", username=user, password=password)
    if client == "impyla":
        from impala.dbapi import connect as impyla_connect

        if user is None:
            return impyla_connect(host=host, port=port, auth_mechanism="NOSASL", timeout=120)
        return impyla_connect(host=host, port=port, auth_mechanism="PLAIN", user=user, password=password, timeout=120)
    if client == "pyhive":
        from pyhive import hive

        if user is None:
            return hive.connect(host=host, port=port, auth="NOSASL", username="tpch")
        return hive.connect(host=host, port=port, auth="CUSTOM", username=user, password=password)
    raise SystemExit("unknown client %r" % client)


_transports = []


def record_transports(module):
    """Keeps the THttpClient PyHive makes inside connect(), whose HTTP
    status is all that tells a refusal from a broken reply."""
    base = module.THttpClient
    if getattr(base, "_hs2_recorded", False):
        return

    class Recorded(base):
        _hs2_recorded = True

        def __init__(self, *args, **kwargs):
            base.__init__(self, *args, **kwargs)
            _transports.append(self)

    module.THttpClient = Recorded


def last_pyhive_transport():
    return _transports[-1] if _transports else None


def refusal(conn_error):
    """The text of a refusal: PyHive over HTTP reads a 401's text body as
    Thrift and fails on it, so the HTTP status its transport kept is added
    (impyla raises an HttpError with the status and body itself)."""
    text = "%s: %s" % (type(conn_error).__name__, conn_error)  # a Thrift exception's repr omits its message
    if repr(conn_error) not in text:
        text += " [%r]" % (conn_error,)
    transport = getattr(conn_error, "_hs2_transport", None)
    if transport is not None and getattr(transport, "code", None) not in (None, 200):
        text += " (HTTP %d %s: %s)" % (transport.code, transport.message, transport.headers.get("WWW-Authenticate"))
    return text


def metadata(cur):
    """impyla's metadata calls (PyHive and gohive have none): each sends
    Hive's regular expression ".*" for "any"."""
    checks = []
    cur.get_tables()
    tables = [r[2] for r in cur.fetchall()]
    checks.append(("get_tables", "lineitem" in tables and "region" in tables, tables))
    schema = cur.get_table_schema("region")
    checks.append(("get_table_schema", schema == [("r_regionkey", "INTEGER"), ("r_name", "VARCHAR"), ("r_comment", "VARCHAR")], schema))
    cur.get_functions()
    fns = cur.fetchall()
    names = {r[2] for r in fns}
    checks.append(("get_functions", len(fns) > 500 and {"sum", "tpch_queries"} <= names and
                   [d[0] for d in cur.description] == ["FUNCTION_CAT", "FUNCTION_SCHEM", "FUNCTION_NAME",
                                                       "REMARKS", "FUNCTION_TYPE", "SPECIFIC_NAME"], len(fns)))
    passed = failed = 0
    for name, ok, got in checks:
        if ok:
            passed += 1
        else:
            failed += 1
            print("%s FAILED: got %r" % (name, got))
    print("%d passed, %d failed" % (passed, failed))
    return 0 if failed == 0 else 1


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--client", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--reference", required=True)
    ap.add_argument("--user")
    ap.add_argument("--password")
    ap.add_argument("--expect-refused", metavar="TEXT",
                    help="the connection or its first statement must fail with an error containing TEXT")
    ap.add_argument("--smoke", action="store_true", help="one query (the rows of nation) instead of the 22")
    ap.add_argument("--http", action="store_true")
    ap.add_argument("--metadata", action="store_true",
                    help="check impyla's metadata calls (GetTables, GetColumns, GetFunctions) instead of the queries")
    a = ap.parse_args()
    queries, answers = published(a.reference)
    if a.expect_refused is not None:
        conn = None
        try:
            conn = connect(a.client, a.host, a.port, a.user, a.password, a.http)
            conn.cursor().execute("SELECT 1")
        except Exception as e:  # each client raises its own class
            if conn is None and a.client == "pyhive" and a.http:
                e._hs2_transport = last_pyhive_transport()
            text = refusal(e)
            print("refused: %s" % text)
            if a.expect_refused in text:
                print("1 passed, 0 failed")
                return 0
            print("the refusal does not say %r" % a.expect_refused)
            print("0 passed, 1 failed")
            return 1
        print("connected and ran a statement: not refused")
        print("0 passed, 1 failed")
        return 1
    if a.smoke:
        conn = connect(a.client, a.host, a.port, a.user, a.password, a.http)
        cur = conn.cursor()
        cur.execute("SELECT count(*), sum(n_regionkey) FROM nation")
        rows = [tuple(r) for r in cur.fetchall()]
        cur.close()
        conn.close()
        if rows == [(25, 50)]:
            print("nation ok")
            print("1 passed, 0 failed")
            return 0
        print("nation FAILED: %r, want [(25, 50)]" % rows)
        print("0 passed, 1 failed")
        return 1
    conn = connect(a.client, a.host, a.port, a.user, a.password, a.http)
    cur = conn.cursor()
    if a.metadata:
        return metadata(cur)
    passed = failed = 0

    # A statement the engine refuses is an error status with the engine's
    # message; the session goes on.
    try:
        cur.execute("SELEC 1")
        print("bad statement: no error")
        failed += 1
    except Exception as e:  # each client raises its own class
        if "syntax error" in str(e):
            passed += 1
        else:
            print("bad statement: unexpected error %r" % e)
            failed += 1

    for nr in range(1, 23):
        try:
            cur.execute(queries[nr])
            rows = cur.fetchall()
            err = compare(rows, answers[nr])
            if err is None and answers[nr] and len(cur.description) != len(answers[nr][0]):
                err = "description has %d columns" % len(cur.description)
        except Exception as e:
            err = "error: %r" % e
        if err:
            failed += 1
            print("Q%d FAILED: %s" % (nr, err))
        else:
            passed += 1
            print("Q%d ok (%d rows)" % (nr, len(rows)))
    cur.close()
    conn.close()
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
