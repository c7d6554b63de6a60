"""A byte forwarder for the Traefik test, run as a script: ``bridge.py LISTEN TARGET``, each
``tcp:HOST:PORT`` or ``unix:PATH``. Traefik runs in a network namespace of its own (the pods'
addresses are local there, so nothing it proxies to leaves the machine) and reaches the API
server on the root namespace's loopback through a Unix socket, which both namespaces see.
Prints ``ready`` once it listens."""

from __future__ import annotations

import asyncio
import sys


async def _open(spec: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    kind, _, rest = spec.partition(":")
    if kind == "unix":
        return await asyncio.open_unix_connection(rest)
    host, _, port = rest.rpartition(":")
    return await asyncio.open_connection(host, int(port))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.IncompleteReadError):
        pass
    finally:
        writer.close()


async def _main(listen: str, target: str) -> None:
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            t_reader, t_writer = await _open(target)
        except OSError:
            writer.close()
            return
        await asyncio.gather(_pipe(reader, t_writer), _pipe(t_reader, writer))

    kind, _, rest = listen.partition(":")
    if kind == "unix":
        server = await asyncio.start_unix_server(handle, rest)
    else:
        host, _, port = rest.rpartition(":")
        server = await asyncio.start_server(handle, host, int(port))
    print("ready", flush=True)
    async with server:
        await server.serve_forever()


if __name__ == "__main__":
    asyncio.run(_main(sys.argv[1], sys.argv[2]))
