"""The ``local`` provider: :class:`~selfheal.llm.openai_compat.OpenAICompatible` on a supervised
llama-server, restarted and retried once when it dies, several answers to one prompt asked as
one request (docs/local_model.md)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import openai

from selfheal.errors import ProviderError, ProviderUnavailable
from selfheal.llm.aio import blocking, entered
from selfheal.llm.base import Completion, CompletionRequest, TokenCallback
from selfheal.llm.openai_compat import OpenAICompatible
from selfheal.llm.openai_errors import TRANSPORT_ERRORS, IncompleteStream, is_timeout
from selfheal.local.server import Endpoint, LocalServer, shared_server
from selfheal.local.settings import DEFAULT_SLOTS, env_int, server_settings
from selfheal.local.weights import DEFAULT_MODEL


class _Dropped(Exception):
    """The connection to a supervised server broke (it may have died)."""

    def __init__(self, cause: BaseException, streamed: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.streamed = streamed


class LocalProvider(OpenAICompatible):
    """:class:`OpenAICompatible` for llama-server (see the module docs); ``server``'s alias is
    the model name unless one is given. The other arguments are :class:`OpenAICompatible`'s;
    requests ask for the prompt cache (``local=True``); ``one_request`` defaults to the
    server's setting (on)."""

    def __init__(
        self, model: str = "", *, server: LocalServer | None = None, **options: Any
    ) -> None:
        options.setdefault("one_request", server.settings.one_request if server else True)
        super().__init__(model or (server.settings.alias if server else ""), local=True, **options)
        self.server = server
        if server is not None:
            self._base_url = None

    @property
    def max_concurrency(self) -> int | None:  # type: ignore[override]
        """A supervised server's slots (more requests would wait in its queue), else what was
        given."""
        return self.server.settings.slots if self.server is not None else self._max_concurrency

    @property
    def base_url(self) -> str | None:
        """The server's URL (for a supervised server: once it has started)."""
        return self.server.base_url if self.server is not None else self._base_url

    def __repr__(self) -> str:
        where = self.base_url or ("(starts on first use)" if self.server else "(SDK default)")
        return f"LocalProvider(model={self.model!r}, base_url={where!r})"

    def _address(self, endpoint: Endpoint | None) -> tuple[str | None, str]:
        """Where requests go: the started server's URL and key, else the ones given."""
        if endpoint is not None:
            return endpoint.base_url, endpoint.api_key
        return self._base_url, self._api_key

    async def _endpoint(self) -> Endpoint | None:
        if self.server is None:
            return None
        endpoint = self.server.current()
        if endpoint is None:  # not started yet (or died): start it off the event loop
            endpoint = await asyncio.to_thread(self.server.ensure)
        return endpoint

    @entered
    async def aforget_prompts(self) -> None:
        """Make the next request start cold: restart this provider's supervised llama-server
        (2.6 s on 2 cores with the model in the page cache: benchmarks/bench_restart.py).
        The benchmark runner calls it before each (task, mode) run, so that no mode is
        served prompts another mode processed. A restart, not an erase of the slots: the server also keeps prompts in a
        cache in host memory (``--cache-ram``) that no endpoint clears (docs/evaluation.md).
        Does nothing for a server this provider does not supervise, or one not started."""
        if self.server is not None and self.server.current() is not None:
            await asyncio.to_thread(self.server.restart)

    forget_prompts = blocking(aforget_prompts)
    """Blocking twin of :meth:`aforget_prompts`."""

    async def _send(self, request: CompletionRequest) -> Completion:
        return (await self._request(self._body(request), request, await self._endpoint()))[0]

    async def _send_many(
        self, request: CompletionRequest, on_tokens: list[TokenCallback | None]
    ) -> list[Completion]:
        body = {**self._body(request), "n": len(on_tokens)}
        return await self._request(body, request, await self._endpoint(), on_tokens)

    async def _request(
        self,
        body: dict[str, Any],
        request: CompletionRequest,
        endpoint: Endpoint | None,
        on_tokens: list[TokenCallback | None] | None = None,
    ) -> list[Completion]:
        try:
            return await self._stream(body, request, *self._address(endpoint), on_tokens)
        except _Dropped as first:
            server = self.server
            assert server is not None and endpoint is not None
            dropped = first
            # The server may have died: restart it once (or join a restart another request
            # made) and send the request again, unless tokens already reached on_token.
            if not dropped.streamed and await asyncio.to_thread(server.recover, endpoint):
                try:
                    address = self._address(await self._endpoint())
                    return await self._stream(body, request, *address, on_tokens)
                except _Dropped as again:
                    dropped = again
            await asyncio.to_thread(server.settle)
            raise self._dropped_error(dropped) from dropped.cause

    def _failure(self, exc: Exception, streamed: bool, base_url: str | None) -> Exception:
        dropped = isinstance(
            exc, (openai.APIConnectionError, IncompleteStream, *TRANSPORT_ERRORS)
        ) and not is_timeout(exc)
        if dropped and self.server is not None:
            return _Dropped(exc, streamed=streamed)
        return super()._failure(exc, streamed, base_url)

    def _map_error(
        self, exc: BaseException, base_url: str | None, *, died: str = "", log: str = ""
    ) -> ProviderError:
        server = self.server
        if server is not None:
            died = server.describe_exit() if not server.alive and server.pid is not None else ""
            log = str(server.log_path)
        return super()._map_error(exc, base_url, died=died, log=log)

    def _dropped_error(self, dropped: _Dropped) -> ProviderError:
        assert self.server is not None
        if self.server.alive:
            return self._map_error(dropped.cause, self.server.base_url)
        cut = (
            " after tokens were already streamed to on_token (not retried)"
            if dropped.streamed
            else ""
        )
        return ProviderUnavailable(
            f"The connection to the local model server broke{cut}. " + self.server.describe_exit(),
            provider="local",
            model=self.model,
        )


def local_provider(model_path: str = "", *, env: Mapping[str, str] | None = None) -> LocalProvider:
    """The ``local`` provider: a :class:`LocalProvider` on the shared supervised server for
    ``model_path`` (default: the installed model), started on the first request. With
    ``$SELFHEAL_LOCAL_URL`` set it talks to that server instead (``selfheal serve`` prints it)
    with ``$SELFHEAL_LOCAL_KEY``."""
    env = os.environ if env is None else env
    url = env.get("SELFHEAL_LOCAL_URL", "").strip()
    if url:
        name = Path(model_path).stem if model_path else DEFAULT_MODEL.name
        return LocalProvider(
            model=name,
            base_url=url,
            api_key=env.get("SELFHEAL_LOCAL_KEY") or "sk-no-key",
            model_id=f"local:{name}",
            max_concurrency=env_int(env, "SELFHEAL_LOCAL_SLOTS", DEFAULT_SLOTS),
        )
    settings = server_settings(model_path or None, env=env)
    return LocalProvider(server=shared_server(settings), model_id=f"local:{settings.alias}")
