"""asyncio: listeners, connections, request dispatch, timers. The only async code in a broker."""
