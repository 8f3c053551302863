"""The local model's engine: llama.cpp's ``llama-server``, built, supervised and fed by selfheal,
behind the OpenAI-compatible provider (docs/local_model.md); on import it registers the
``local`` backend with :mod:`selfheal.llm`'s router."""

from __future__ import annotations

from collections.abc import Mapping

from selfheal.llm.base import Provider
from selfheal.llm.router import use_local_engine
from selfheal.local.settings import find_server_binary
from selfheal.local.weights import find_model


class _Engine:
    """The ``local`` backend as the model router sees it (``selfheal.llm.router.LocalEngine``)."""

    def installed(self, env: Mapping[str, str]) -> tuple[str | None, str]:
        if env.get("SELFHEAL_LOCAL_URL", "").strip():
            return "", ""
        path = find_model()
        if path is None:
            return None, "the local model is not installed"
        if find_server_binary() is None:
            return None, "the local model is installed but llama-server is not built"
        return str(path), ""

    def provider(self, model_path: str, env: Mapping[str, str]) -> Provider:
        from selfheal.local.provider import local_provider

        return local_provider(model_path, env=env)


use_local_engine(_Engine())
