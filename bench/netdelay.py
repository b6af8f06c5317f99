"""A TCP proxy that delays every chunk of bytes it forwards: PostgreSQL as if on another machine.

    python bench/netdelay.py [--listen 15432] [--target 127.0.0.1:5432] [--delay-ms 0.5]

Then point a benchmark at it, e.g. ``python bench/run.py --backend postgres --pg-url
postgresql+psycopg://postgres@127.0.0.1:15432/test --workloads W2``. Each direction waits
``--delay-ms`` before passing data on, so a round trip costs at least twice that more.
The wait is an asyncio timer, so its real length is rounded up to the event loop's
granularity (about a millisecond: epoll's timeout is in milliseconds) and moves with the
machine's load: compare figures taken through the proxy with each other, in one run, not
with a real network. Loopback only (``tc netem`` would do this in the kernel, where the
module is available: it is not on the project's machines).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, delay: float) -> None:
    loop = asyncio.get_running_loop()
    try:
        while data := await reader.read(65536):
            loop.call_later(delay, writer.write, data)
    finally:
        await asyncio.sleep(delay * 2)  # what is still on its way goes first
        writer.close()


async def serve(listen: int, host: str, port: int, delay: float) -> None:
    async def handle(client_r: asyncio.StreamReader, client_w: asyncio.StreamWriter) -> None:
        try:
            server_r, server_w = await asyncio.open_connection(host, port)
        except OSError:
            client_w.close()
            return
        await asyncio.gather(
            _pipe(client_r, server_w, delay),
            _pipe(server_r, client_w, delay),
            return_exceptions=True,
        )

    server = await asyncio.start_server(handle, "127.0.0.1", listen)
    print(
        f"netdelay: 127.0.0.1:{listen} -> {host}:{port}, {delay * 1000:g} ms each way", flush=True
    )
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--listen", type=int, default=15432)
    ap.add_argument("--target", default="127.0.0.1:5432")
    ap.add_argument("--delay-ms", type=float, default=0.5)
    args = ap.parse_args()
    host, _, port = args.target.rpartition(":")
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve(args.listen, host or "127.0.0.1", int(port), args.delay_ms / 1000))


if __name__ == "__main__":
    main()
