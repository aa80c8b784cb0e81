#!/usr/bin/python3
"""What a running stack's Redis holds, by key kind (issue 25): a helper of
bench_mem.py (REDIS_BREAKDOWN=1), also run alone against a Redis:

    bench/redis_breakdown.py PORT [PODS]

For every key of the store's prefix (pc:): its type, MEMORY USAGE (every
element counted: SAMPLES 0), its element count (HLEN, ZCARD, XLEN) and, for
the object hashes and history streams, the mean length of the stored JSON.
With PODS, each figure is also divided by it (bytes per pod). Prints one
line per key and a total; breakdown(port) returns the same as a dict.
Loopback only; a minimal RESP client (no Python Redis package needed).
"""
import socket
import sys


class Resp:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=60)
        self.f = self.s.makefile("rb")

    def cmd(self, *args):
        out = [b"*%d\r\n" % len(args)]
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out.append(b"$%d\r\n%s\r\n" % (len(a), a))
        self.s.sendall(b"".join(out))
        return self.read()

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest.decode()
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)[:-2]
            return data
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("bad reply %r" % line)

    def close(self):
        self.s.close()


def _mean_json(r, key, typ):
    """Mean length of the stored objects in a hash (o: fields) or stream (obj values), from up to 200."""
    lens = []
    if typ == "hash":
        cur = b"0"
        while len(lens) < 200:
            cur, items = r.cmd("HSCAN", key, cur, "MATCH", "o:*", "COUNT", 200)
            lens += [len(items[i + 1]) for i in range(0, len(items), 2)]
            if cur == b"0":
                break
    elif typ == "stream":
        for _id, fields in r.cmd("XREVRANGE", key, "+", "-", "COUNT", 200) or []:
            for i in range(0, len(fields), 2):
                if fields[i] == b"obj":
                    lens.append(len(fields[i + 1]))
    return round(sum(lens) / len(lens)) if lens else 0


def breakdown(port, prefix="pc:"):
    r = Resp(port)
    keys, cur = [], b"0"
    while True:
        cur, batch = r.cmd("SCAN", cur, "MATCH", prefix + "*", "COUNT", 1000)
        keys += batch
        if cur == b"0":
            break
    rows = []
    for k in sorted(keys):
        typ = r.cmd("TYPE", k)
        mem = r.cmd("MEMORY", "USAGE", k, "SAMPLES", 0) or 0
        n = {"hash": "HLEN", "zset": "ZCARD", "stream": "XLEN", "set": "SCARD", "list": "LLEN"}.get(typ)
        rows.append({"key": k.decode(), "type": typ, "bytes": mem, "n": r.cmd(n, k) if n else 1,
                     "mean_obj": _mean_json(r, k, typ)})
    info = r.cmd("INFO", "memory").decode()
    r.close()
    used = int(next(ln.split(":")[1] for ln in info.splitlines() if ln.startswith("used_memory:")))
    return {"used_memory": used, "keys": rows}


def main():
    if len(sys.argv) < 2:  # make bench runs every bench/*.py: without a Redis there is nothing to read
        print("redis_breakdown: usage: redis_breakdown.py PORT [PODS] (skipped: no port)")
        return
    port = int(sys.argv[1])
    pods = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    b = breakdown(port)
    total = 0
    for row in b["keys"]:
        total += row["bytes"]
        per = " %8.1f B/pod" % (row["bytes"] / pods) if pods else ""
        print("%-40s %-6s n=%-8d %12d B%s mean_obj=%d" % (row["key"], row["type"], row["n"], row["bytes"], per,
                                                         row["mean_obj"]))
    print("keys total %d B, used_memory %d B" % (total, b["used_memory"]))


if __name__ == "__main__":
    main()
