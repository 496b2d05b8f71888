"""The shared cache: Django's Redis cache, which starts the embedded Redis on a laptop.

Rate limits and the reaper's throttle are only limits if every process sees
the same counters, so the cache is Redis in every deployment. With no broker
configured, the site and workers share the embedded redis-server; whichever
process touches the cache first brings it up, as the broker's users do.
"""

from __future__ import annotations

import json
from functools import cached_property
from typing import Any

from django.core.cache.backends.redis import RedisCache

from advisor import embedded_redis


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


class SharedRedisCache(RedisCache):
    @cached_property
    def _cache(self) -> Any:
        from django.conf import settings

        socket = settings.ADVISOR_EMBEDDED_REDIS
        if socket and any(s.startswith(f"unix://{socket}") for s in self._servers):
            embedded_redis.ensure(socket)
        return super()._cache
