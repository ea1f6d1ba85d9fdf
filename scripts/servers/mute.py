#!/usr/bin/env python3
"""A TCP server that takes connections and never answers them (stdlib only):
an https:// URL naming it waits for a TLS handshake that never comes.

    mute.py        prints "listening on PORT" once it listens on 127.0.0.1;
                   every connection is accepted and held open, never
                   written to

A connection whose first bytes are "count\\n" is answered with the number of
the other connections accepted before it (a decimal line), then closed.
Connections are accepted in the order they were made, so that number counts
every connection made before the question.
"""
import socket
import sys
import threading

LOCK = threading.Lock()
STATE = {"accepted": 0, "questions": 0}
HELD = []


def handle(conn, before):
    try:
        first = conn.recv(6)
    except OSError:
        return
    if first != b"count\n":
        return  # held open, unanswered, until the server ends
    with LOCK:
        others = before - STATE["questions"]
        STATE["questions"] += 1
    conn.sendall(f"{others}\n".encode())
    conn.close()


def main():
    if len(sys.argv) > 1:
        sys.exit(__doc__)
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    print(f"listening on {s.getsockname()[1]}", flush=True)
    while True:
        conn, _ = s.accept()
        HELD.append(conn)
        with LOCK:
            before = STATE["accepted"]
            STATE["accepted"] += 1
        threading.Thread(target=handle, args=(conn, before), daemon=True).start()


if __name__ == "__main__":
    main()
