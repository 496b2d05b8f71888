"""The shared cache: Django's Redis cache, which starts the embedded Redis on a laptop.

Rate limits and the reaper's throttle are only limits if every process sees
the same counters, so the cache is Redis in every deployment. With no broker
configured, the site and workers share the embedded redis-server; whichever
process touches the cache first brings it up, as the broker's users do.
"""

from __future__ import annotations

import hashlib
import json
import logging
from functools import cache as once
from functools import cached_property
from pathlib import Path
from typing import Any

from django.core.cache.backends.redis import RedisCache

from advisor import embedded_redis

log = logging.getLogger(__name__)


class JSONSerializer:
    """Values as JSON, never pickles: whoever can write to Redis cannot run code here.

    Integers stay raw, as Redis's INCR (the rate limits' counters) needs them.
    """

    def dumps(self, obj: Any) -> int | bytes:
        if type(obj) is int:
            return obj
        return json.dumps(obj, separators=(",", ":")).encode()

    def loads(self, data: bytes) -> Any:
        try:
            return int(data)
        except ValueError:
            return json.loads(data)


# redis-py's TCP connection takes these; its unix-socket connection refuses them (a
# TypeError on the first command), and a unix socket has no link to lose.
TCP_ONLY_OPTIONS = ("socket_keepalive", "socket_keepalive_options")


class SharedRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> Any:
        from django.conf import settings

        socket = settings.ADVISOR_EMBEDDED_REDIS
        if socket and any(s.startswith(f"unix://{socket}") for s in self._servers):
            embedded_redis.ensure(socket)
        if all(server.startswith("unix://") for server in self._servers):
            self._options = {k: v for k, v in self._options.items() if k not in TCP_ONLY_OPTIONS}
        return super()._cache


@once
def code_digest() -> str:
    """A digest of the code and templates a page is made from (once per process).

    Keys of rendered HTML carry it, so a deploy renders afresh.
    """
    from django.conf import settings

    digest = hashlib.sha256()
    base = Path(settings.BASE_DIR)
    for folder, pattern in (("advisor", "*.py"), ("profiling", "*.py"), ("templates", "*.html")):
        for path in sorted((base / folder).rglob(pattern)):
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def get_many(keys: list[str]) -> dict[str, Any]:
    """What the shared cache holds of `keys`; nothing when it is unreachable.

    Rendered pages are only kept to save time, so an outage costs the
    rendering, never the page.
    """
    from django.core.cache import cache

    try:
        return cache.get_many(keys) if keys else {}
    except Exception as exc:
        log.warning("cache unreachable: %s", exc)
        return {}


def set_many(values: dict[str, Any], timeout_s: int) -> None:
    from django.core.cache import cache

    try:
        if values:
            cache.set_many(values, timeout_s)
    except Exception as exc:
        log.warning("not cached: %s", exc)
