#!/usr/bin/env python3
"""A TCP proxy on 127.0.0.1 that adds a round-trip time (stdlib only).

    delayproxy.py LISTEN_PORT TARGET_PORT DELAY_MS    prints "listening on PORT" once it
                                                      accepts (LISTEN_PORT 0: a free port)

Every connection to 127.0.0.1:LISTEN_PORT is forwarded to 127.0.0.1:TARGET_PORT. Each
piece of data read in either direction is written on DELAY_MS/2 after it arrived, so a
request and its answer cost DELAY_MS more than without the proxy, however many requests
a connection carries (keep-alive) and however many are in flight on it (pipelined
bytes): pieces are held by their arrival time, never behind one another's delay. A new
connection's first bytes toward the target wait one more DELAY_MS from its accept: the
round trip a TCP handshake costs before a client can send.
"""
import asyncio
import sys

TASKS = set()  # every connection's task, held until it ends (the loop keeps only weak references)


async def pump(reader, writer, delay, start):
    """Copy `reader` to `writer`, each piece written `delay` seconds after it arrived
    (and not before `start`, a loop time); closes `writer`'s side when `reader` ends."""
    loop = asyncio.get_running_loop()
    held = asyncio.Queue()

    async def read():
        try:
            while True:
                data = await reader.read(1 << 16)
                await held.put((max(loop.time(), start) + delay, data))
                if not data:
                    return
        except (OSError, ValueError):
            await held.put((loop.time(), b""))

    task = asyncio.create_task(read())
    try:
        while True:
            due, data = await held.get()
            wait = due - loop.time()
            if wait > 0:
                await asyncio.sleep(wait)
            if not data:
                if writer.can_write_eof():
                    writer.write_eof()
                return
            writer.write(data)
            await writer.drain()
    except (OSError, RuntimeError):
        pass
    finally:
        task.cancel()


async def serve(client_r, client_w, target, delay):
    accepted = asyncio.get_running_loop().time()
    try:
        server_r, server_w = await asyncio.open_connection("127.0.0.1", target)
    except OSError:
        client_w.close()
        return
    # Toward the target, from the client: a client's EOF is passed on and the answer still
    # comes back (half-close). Once the answers end, so does the connection.
    up = asyncio.create_task(pump(client_r, server_w, delay / 2, accepted + delay))
    try:
        await pump(server_r, client_w, delay / 2, 0.0)
    finally:
        up.cancel()
        for w in (server_w, client_w):
            w.close()


async def main(listen, target, delay_ms):
    delay = delay_ms / 1000.0

    def connected(r, w):
        task = asyncio.create_task(serve(r, w, target, delay))
        TASKS.add(task)
        task.add_done_callback(TASKS.discard)

    server = await asyncio.start_server(connected, "127.0.0.1", listen)
    print(f"listening on {server.sockets[0].getsockname()[1]}", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    asyncio.run(main(int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])))
