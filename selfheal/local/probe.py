"""One short generation through a llama-server and the speed it measured (``selfheal
doctor``)."""

from __future__ import annotations

import time

import httpx

from selfheal._record import Record

__all__ = ["ProbeResult", "probe"]


class ProbeResult(Record):
    """One short generation through a server (``selfheal doctor``)."""

    ok: bool
    """It answered."""
    seconds: float = 0.0
    """Wall time of the request."""
    prompt_tokens: int = 0
    """Prompt tokens."""
    completion_tokens: int = 0
    """Generated tokens."""
    generated_per_second: float | None = None
    """Decode speed the server measured (``timings.predicted_per_second``)."""
    prompt_per_second: float | None = None
    """Prompt speed the server measured (``timings.prompt_per_second``)."""
    sample: str = ""
    """The start of the reply."""
    error: str = ""
    """What went wrong."""


def probe(
    base_url: str, api_key: str, *, model: str = "local", max_tokens: int = 32
) -> ProbeResult:
    """Ask the server for a short function and report its speed (one plain HTTP request)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Write a Python function add(a, b). Code only."}],
        "max_tokens": max_tokens,
        "temperature": 0.0,
        "cache_prompt": False,
    }
    started = time.monotonic()
    try:
        r = httpx.post(
            base_url.rstrip("/") + "/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {api_key}"},
            timeout=300,
        )
        r.raise_for_status()
        data = r.json()
    except (httpx.HTTPError, ValueError) as exc:
        return ProbeResult(ok=False, error=f"{type(exc).__name__}: {exc}")
    usage = data.get("usage") or {}
    timings = data.get("timings") or {}
    text = ((data.get("choices") or [{}])[0].get("message") or {}).get("content") or ""
    return ProbeResult(
        ok=True,
        seconds=round(time.monotonic() - started, 2),
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        completion_tokens=int(usage.get("completion_tokens") or 0),
        generated_per_second=_round(timings.get("predicted_per_second")),
        prompt_per_second=_round(timings.get("prompt_per_second")),
        sample=text.strip()[:80],
    )


def _round(value: object) -> float | None:
    return round(float(value), 2) if isinstance(value, (int, float)) else None
