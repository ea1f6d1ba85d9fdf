#!/usr/bin/env python3
"""A threaded HTTP server of a directory, with faults on cue (stdlib only).

    faulty.py DIR [--port N] [--tls CERT KEY] [--record]
                                  prints "listening on PORT" once it serves;
                                  with --tls, HTTPS only (PEM files); with
                                  --record, every request is kept (method,
                                  path and query, headers, body) and /_stats
                                  gives them as "log" (a server that should
                                  be sent nothing: a redirect's target)

GET /PATH serves DIR/PATH: a single `Range: bytes=A-B` (or `A-`, `-N`) gives a
206 with `Content-Range`; every answer has an `ETag` (size and mtime hashed)
and `If-Match` with another tag gives a 412. Multi-range requests get a 400.

Faults, by the syntax MODE[:ARG]:
  ignore-range   200 with the whole body to a ranged request
  no-suffix      200 with the whole body to a suffix range (`-N`); other
                 ranges honoured
  5xx:N          503 to the next N requests
  drop           headers for the whole answer, half the body, connection closed
  etag-change    a different ETag (and If-Match not checked), as when the
                 object was replaced behind a server that ignores If-Match
  short-range    206 with a Content-Range (and body) half as long as asked
  stall:SECS     sleep SECS before answering (past the client's timeout)
  overlong:MIB   the answer's body goes on for MIB MiB of zeros past what
                 its Content-Range (or the file) says, Content-Length
                 counting them
  endless        (S3-style listings) every page says there is another,
                 with the same continuation token
  weak-etag      every ETag weak (W/"..."), in listings too, and If-Match
                 compared strongly (as nginx does): a 412 whenever sent
  broken-pages   (S3-style listings) pages of one entry; every page after
                 the first answers 503, as a store that died mid-listing
  long-names:N   (S3-style listings) N pages of 4 objects named by 1 MiB
                 each, then the real listing
  redirect:CODE[:PORT]
                 answers CODE (301, 302, 307, 308) with a Location of the
                 same path and query (without /_f/MODE) on 127.0.0.1:PORT,
                 or on this server (a relative one) without PORT
overlong, endless, broken-pages, long-names and redirect are the faults set
by /_fault that listings take (weak-etag applies to both, uncounted);
redirect is the one a login takes.
chosen either
  - for every request: POST /_fault?mode=MODE[&count=N] applies MODE to the
    next N GETs (default: all until POST /_fault?mode=none; `5xx:N` counts N)
  - per path: GET /_f/MODE/PATH serves PATH with MODE on every request.
GET /_stats -> JSON {"gets", "heads", "lists", "paths": {path: gets},
"ranges": [[path, Range, If-Match]], "faulted": {fault: requests it applied to},
"log": [{"method", "path", "headers", "body"}] (with --record; the /_... requests
left out)};
POST /_reset clears them and the fault.

POST /auth/jwt/login (a Caterva2 login) answers 204 with a session cookie,
whatever the form says.

GET /DIR/?list-type=2&prefix=P&delimiter=/ answers an S3-style XML listing
(ListObjectsV2, one page) of DIR's files whose relative path starts with P.

Synthetic directories, with no files on disk:
  GET /_big/N/?list-type=2...   one directory, d/, holding N objects
                                d/f0000000, d/f0000001, ... (8 bytes each,
                                ETag "big-I"), listed (prefix d/) in pages
                                of 1,000 with continuation tokens; the page
                                from key I on is held by /_hold as the path
                                /_big/N/?page=I
  GET /_big/N/d/fIIIIIII        that object's bytes: "IIIIIII\n" (ranges,
                                If-Match as for files)

More faults, set by POST:
  /_fault?mode=down-after:K     the store dies after K more listing pages:
                                every later request (listings too) is a 503
                                ("faulted": {"down": requests})
  /_hold?prefix=P               GETs of paths starting with P (not listings)
                                wait until POST /_release; "held" in /_stats
                                counts those waiting
"""
import hashlib
import json
import os
import re
import ssl
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit
from xml.sax.saxutils import escape

ROOT = "."
LOCK = threading.Lock()
STATE = {"mode": None, "left": None}
RECORD = False
RELEASED = threading.Event()


def clear_counters():
    STATE.update(gets=0, heads=0, lists=0, paths={}, ranges=[], faulted={}, log=[],
                 held=0, hold=None, down_after=None)


clear_counters()


def etag(st, changed=False):
    h = hashlib.sha1(f"{st.st_size}-{st.st_mtime_ns}".encode()).hexdigest()[:16]
    return f'"{h}{"-changed" if changed else ""}"'


def take_fault():
    """The global fault for this request, counting it down."""
    with LOCK:
        mode, left = STATE["mode"], STATE["left"]
        if mode is None:
            return None
        if left is not None:
            STATE["left"] = left - 1
            if left - 1 <= 0:
                STATE["mode"] = STATE["left"] = None
        return mode


def is_down(listing):
    """Has the store died (down-after:K)? A listing page counts down K."""
    with LOCK:
        left = STATE["down_after"]
        if left is None:
            return False
        if left > 0:
            STATE["down_after"] = left - 1 if listing else left
            return False
        STATE["faulted"]["down"] = STATE["faulted"].get("down", 0) + 1
        return True


def hold(path):
    """Wait until released if GETs of `path` are held (/_hold)."""
    with LOCK:
        held = STATE["hold"] is not None and path.startswith(STATE["hold"])
        if held:
            STATE["held"] += 1
    if held:
        RELEASED.wait()
        with LOCK:
            STATE["held"] -= 1


def byte_range(rng, size):
    """(start, end exclusive) of a `bytes=A-B`, `A-` or `-N` range of `size`
    bytes; the whole of it without one."""
    m = re.fullmatch(r"bytes=(\d*)-(\d*)", (rng or "").strip())
    if not m or not (m.group(1) or m.group(2)):
        return 0, size
    if m.group(1):
        end = min(size, int(m.group(2)) + 1) if m.group(2) else size
        return min(int(m.group(1)), end), end
    return max(0, size - int(m.group(2))), size


class Server(ThreadingHTTPServer):
    """HTTP. A client opening many connections at once (a mount's reads in parallel)
    would have SYNs dropped past socketserver's backlog of 5, each then waiting for
    a retransmission (1 s)."""

    request_queue_size = 128


class TLSServer(Server):
    """HTTPS: each connection's handshake is made in its own thread, so a
    client that refuses the certificate holds up nobody else."""

    def __init__(self, addr, handler, context):
        super().__init__(addr, handler)
        self.context = context

    def get_request(self):
        sock, addr = super().get_request()
        return self.context.wrap_socket(
            sock, server_side=True, do_handshake_on_connect=False), addr

    def handle_error(self, request, client_address):
        # A client refusing the certificate (the tests that check it is
        # refused) is not the server's error.
        if not isinstance(sys.exc_info()[1], ssl.SSLError):
            super().handle_error(request, client_address)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as clients pool connections
    # An answer is written as headers, then body: with Nagle's algorithm the body waits
    # for the client's delayed ACK of the headers (40 ms) on a kept-alive connection.
    disable_nagle_algorithm = True

    def setup(self):
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(10)
            self.request.do_handshake()
            self.request.settimeout(None)
        super().setup()

    def log_message(self, *args):
        pass

    def answer(self, code, body=b"", headers=()):
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def overlong(self, code, body, headers, fault):
        """`body`, then MIB MiB of zeros that Content-Length counts."""
        extra = int(fault.split(":")[1]) << 20
        self.send_response(code)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body) + extra))
        self.end_headers()
        try:
            self.wfile.write(body)
            zeros = bytes(1 << 20)
            for _ in range(extra >> 20):
                self.wfile.write(zeros)
        except OSError:
            pass  # the client hung up, as it should
        self.close_connection = True

    def record(self):
        """With --record, keep this request (its body read: a POST's)."""
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else b""
        if RECORD and not self.path.startswith("/_"):
            with LOCK:
                STATE["log"].append({"method": self.command, "path": self.path,
                                     "headers": dict(self.headers.items()),
                                     "body": body.decode("utf-8", "replace")})

    def redirect(self, fault, count=True):
        """Fault redirect:CODE[:PORT]: see the module's docstring."""
        parts = fault.split(":")
        where = f"http://127.0.0.1:{parts[2]}" if len(parts) > 2 else ""
        if count:
            with LOCK:
                STATE["faulted"]["redirect"] = STATE["faulted"].get("redirect", 0) + 1
        rest = re.sub(r"^/_f/[^/]+", "", self.path)
        self.answer(int(parts[1]), b"moved", [("Location", where + rest)])

    def login(self):
        fault = take_fault() or ""
        if fault.startswith("redirect:"):
            return self.redirect(fault)
        self.answer(204, headers=[("Set-Cookie", "c2subauth=faulty-session; Path=/")])

    def do_POST(self):
        self.record()
        url = urlsplit(self.path)
        if url.path == "/auth/jwt/login":
            return self.login()
        q = {k: v[0] for k, v in parse_qs(url.query).items()}
        with LOCK:
            if url.path == "/_reset":
                STATE.update(mode=None, left=None)
                clear_counters()
                RELEASED.set()
            elif url.path == "/_hold" and "prefix" in q:
                RELEASED.clear()
                STATE["hold"] = q["prefix"]
            elif url.path == "/_release":
                STATE["hold"] = None
                RELEASED.set()
            elif url.path == "/_fault" and q.get("mode", "").startswith("down-after:"):
                STATE["down_after"] = int(q["mode"][11:])
            elif url.path == "/_fault" and "mode" in q:
                mode = None if q["mode"] == "none" else q["mode"]
                left = int(q["count"]) if "count" in q else None
                if mode and mode.startswith("5xx:"):
                    left = int(mode[4:])
                STATE.update(mode=mode, left=left)
            else:
                return self.answer(404)
        self.answer(204)

    def do_HEAD(self):
        self.record()
        with LOCK:
            STATE["heads"] += 1
        self.answer(405)

    def do_GET(self):
        self.record()
        url = urlsplit(self.path)
        path = unquote(url.path)
        query = parse_qs(url.query)
        if path != "/_stats" and is_down(query.get("list-type") == ["2"]):
            return self.answer(503, b"the store is down")
        if path.startswith("/_big/"):
            return self.big(path, query)
        if query.get("list-type") == ["2"]:
            with LOCK:
                STATE["lists"] += 1
                mode = STATE["mode"] or ""
            listing_faults = ("overlong:", "endless", "broken-pages", "long-names:", "redirect:")
            fault = take_fault() if mode.startswith(listing_faults) else None
            if fault in ("broken-pages",) or (fault or "").startswith("long-names:"):
                return self.paged_listing(path, query, fault)
            return self.listing(path, query.get("prefix", [""])[0], query.get("delimiter"), fault)
        if path == "/_stats":
            with LOCK:
                return self.answer(200, json.dumps(STATE).encode())
        fault = take_fault()
        m = re.match(r"/_f/([^/]+)(/.*)", path)
        if m:
            fault, path = m.group(1), m.group(2)
        rng = self.headers.get("Range")
        hold(path)
        with LOCK:
            STATE["gets"] += 1
            STATE["paths"][path] = STATE["paths"].get(path, 0) + 1
            STATE["ranges"].append([path, rng, self.headers.get("If-Match")])
        self.serve(path, rng, fault or "")

    def listing(self, path, prefix, delimiter, fault=None):
        if fault and fault.startswith("redirect:"):
            return self.redirect(fault)
        top = os.path.join(ROOT, path.strip("/"))
        files, dirs = [], set()
        for d, _, names in os.walk(top):
            for n in names:
                rel = os.path.relpath(os.path.join(d, n), top).replace(os.sep, "/")
                if not rel.startswith(prefix):
                    continue
                rest = rel[len(prefix):]
                if delimiter and "/" in rest:
                    dirs.add(prefix + rest.split("/")[0] + "/")
                else:
                    files.append((rel, os.stat(os.path.join(d, n))))
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
               f"<Prefix>{escape(prefix)}</Prefix><KeyCount>{len(files) + len(dirs)}</KeyCount>",
               "<MaxKeys>100000</MaxKeys>"]
        if fault == "endless":
            out.append("<IsTruncated>true</IsTruncated>"
                       "<NextContinuationToken>again</NextContinuationToken>")
        else:
            out.append("<IsTruncated>false</IsTruncated>")
        weak = "W/" if STATE["mode"] == "weak-etag" else ""
        for rel, st in sorted(files):
            when = time.strftime("%Y-%m-%dT%H:%M:%S.000Z", time.gmtime(st.st_mtime))
            out.append(f"<Contents><Key>{escape(rel)}</Key><LastModified>{when}</LastModified>"
                       f"<ETag>{escape(weak + etag(st))}</ETag><Size>{st.st_size}</Size></Contents>")
        out += [f"<CommonPrefixes><Prefix>{escape(p)}</Prefix></CommonPrefixes>" for p in sorted(dirs)]
        out.append("</ListBucketResult>")
        body, headers = "\n".join(out).encode(), [("Content-Type", "application/xml")]
        if fault and fault.startswith("overlong:"):
            return self.overlong(200, body, headers, fault)
        self.answer(200, body, headers)

    def paged_listing(self, path, query, fault):
        """The broken-pages and long-names faults: pages of made-up or
        real entries, the page number in the continuation token."""
        page = int(query.get("continuation-token", ["0"])[0])
        prefix = query.get("prefix", [""])[0]
        with LOCK:
            STATE["faulted"][fault.split(":")[0]] = STATE["faulted"].get(fault.split(":")[0], 0) + 1
        if fault == "broken-pages":
            if page > 0:
                return self.answer(503, b"injected 503")
            keys, more = [prefix + "first-page-entry"], True
        else:
            pages = int(fault.split(":")[1])
            if page >= pages:
                return self.listing(path, prefix, query.get("delimiter"))
            keys = [prefix + f"{page}-{i}-" + "n" * (1 << 20) for i in range(4)]
            more = True
        # Until the fault's pages are served, every listing request takes it.
        with LOCK:
            STATE.update(mode=fault, left=None)
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
               f"<IsTruncated>{'true' if more else 'false'}</IsTruncated>",
               f"<NextContinuationToken>{page + 1}</NextContinuationToken>"]
        out += [f"<Contents><Key>{escape(k)}</Key><Size>1</Size></Contents>" for k in keys]
        out.append("</ListBucketResult>")
        self.answer(200, "\n".join(out).encode(), [("Content-Type", "application/xml")])

    def big(self, path, query):
        """The synthetic directory /_big/N/: its listing pages, its objects."""
        m = re.fullmatch(r"/_big/(\d+)/(?:d/(f\d{7}))?", path)
        if not m:
            return self.answer(404, b"not found")
        n = int(m.group(1))
        if m.group(2) is None:
            with LOCK:
                STATE["lists"] += 1
            return self.big_page(path, n, query)
        i = int(m.group(2)[1:])
        hold(path)
        with LOCK:
            STATE["gets"] += 1
            STATE["paths"][path] = STATE["paths"].get(path, 0) + 1
        if i >= n:
            return self.answer(404, b"not found")
        body, tag = f"{i:07d}\n".encode(), f'"big-{i}"'
        want = self.headers.get("If-Match")
        if want and want != tag:
            return self.answer(412, b"precondition failed")
        start, end = byte_range(self.headers.get("Range"), len(body))
        headers = [("ETag", tag), ("Content-Range", f"bytes {start}-{end - 1}/{len(body)}")]
        self.answer(206, body[start:end], headers)

    def big_page(self, path, n, query):
        """One page of 1,000 keys of /_big/N/, from the token on (held, by
        /_hold, as the path /_big/N/?page=FIRST)."""
        first = int(query.get("continuation-token", ["0"])[0])
        prefix = query.get("prefix", [""])[0]
        if prefix == "d/":
            hold(f"{path}?page={first}")
        else:
            first = n
        last = min(n, first + 1000)
        out = ['<?xml version="1.0" encoding="UTF-8"?>',
               '<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/">',
               f"<Prefix>{escape(prefix)}</Prefix><KeyCount>{last - first}</KeyCount>"
               "<MaxKeys>1000</MaxKeys>"]
        if last < n:
            out.append(f"<IsTruncated>true</IsTruncated><NextContinuationToken>{last}"
                       "</NextContinuationToken>")
        else:
            out.append("<IsTruncated>false</IsTruncated>")
        out += [f"<Contents><Key>d/f{i:07d}</Key><LastModified>2020-01-01T00:00:00.000Z"
                f"</LastModified><ETag>&quot;big-{i}&quot;</ETag><Size>8</Size></Contents>"
                for i in range(first, last)]
        if prefix == "":
            out.append("<CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes>")
        out.append("</ListBucketResult>")
        self.answer(200, "\n".join(out).encode(), [("Content-Type", "application/xml")])

    def serve(self, path, rng, fault):
        if fault:
            with LOCK:
                name = fault.split(":")[0]
                STATE["faulted"][name] = STATE["faulted"].get(name, 0) + 1
        if fault.startswith("stall:"):
            time.sleep(float(fault[6:]))
        if fault.startswith("5xx"):
            return self.answer(503, b"injected 503")
        if fault.startswith("redirect:"):
            return self.redirect(fault, count=False)
        full = os.path.join(ROOT, path.lstrip("/"))
        if ".." in path.split("/") or not os.path.isfile(full):
            return self.answer(404, b"not found")
        st = os.stat(full)
        tag = etag(st, fault == "etag-change")
        weak = STATE["mode"] == "weak-etag"
        want = self.headers.get("If-Match")
        if weak:
            tag = "W/" + tag
            if want:  # a weak tag never matches strongly
                return self.answer(412, b"precondition failed")
        if want and fault != "etag-change" and want != tag:
            return self.answer(412, b"precondition failed")
        size, start, end = st.st_size, 0, st.st_size  # end exclusive
        suffix = rng is not None and rng.strip().startswith("bytes=-")
        ranged = rng is not None and fault != "ignore-range" and not (fault == "no-suffix" and suffix)
        if ranged:
            m = re.fullmatch(r"bytes=(\d*)-(\d*)", rng.strip())
            if not m or not (m.group(1) or m.group(2)):
                return self.answer(400, b"one range only")
            if m.group(1):
                start = int(m.group(1))
                end = min(size, int(m.group(2)) + 1) if m.group(2) else size
            else:
                start = max(0, size - int(m.group(2)))
            if start >= end:
                return self.answer(416, headers=[("Content-Range", f"bytes */{size}")])
            if fault == "short-range":
                end = start + max(1, (end - start) // 2)
        with open(full, "rb") as f:
            f.seek(start)
            body = f.read(end - start)
        when = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(st.st_mtime))
        headers = [("ETag", tag), ("Accept-Ranges", "bytes"), ("Last-Modified", when)]
        if ranged:
            headers.append(("Content-Range", f"bytes {start}-{end - 1}/{size}"))
        if fault.startswith("overlong:"):
            return self.overlong(206 if ranged else 200, body, headers, fault)
        if fault == "drop":
            self.send_response(206 if ranged else 200)
            for k, v in headers:
                self.send_header(k, v)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            self.close_connection = True
            return
        self.answer(206 if ranged else 200, body, headers)


def main():
    global ROOT, RECORD
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    ROOT = args[0]
    RECORD = "--record" in args
    port = int(args[args.index("--port") + 1]) if "--port" in args else 0
    if "--tls" in args:
        i = args.index("--tls")
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(args[i + 1], args[i + 2])
        server = TLSServer(("127.0.0.1", port), Handler, context)
    else:
        server = Server(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
