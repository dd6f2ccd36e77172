"""Usage and cost of model calls, from what the provider reported; prices from genai-prices.

A response whose model genai-prices does not know has an unknown cost (None), never 0.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Sequence
from contextlib import asynccontextmanager
from typing import Any

from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models import Model, ModelRequestParameters, StreamedResponse
from pydantic_ai.models.wrapper import WrapperModel
from pydantic_ai.settings import ModelSettings

from co_cli.store.usage import TurnUsage, UsageRole

LOCAL_PROVIDER = "llama_cpp"
"""The embedded model's provider name: it runs on this machine, so its answers cost nothing."""


_UNPRICED: set[tuple[str | None, str | None, str]] = set()
"""(provider, provider URL, model) that genai-prices does not know, found once per process: looking one up again
scans every model of every provider (about 0.4 ms a response)."""


def response_cost(response: ModelResponse) -> float | None:
    """The response's price in USD (0 for the embedded model); None when the model, provider or usage is
    unknown. The price pydantic-ai put on the response when it came is used as it is (a provider's own
    figure comes first there): it is not looked up twice."""
    if response.provider_name == LOCAL_PROVIDER:
        return 0.0
    if not response.model_name or response.usage.unmeasured_requests:
        return None
    if response.usage.cost is not None:
        return float(response.usage.cost)
    key = (response.provider_name, response.provider_url, response.model_name)
    if key in _UNPRICED:
        return None
    try:
        return float(response.cost().total_price)
    except LookupError:  # genai-prices does not know this model
        _UNPRICED.add(key)
        return None
    except Exception:  # ValueError: usage it cannot price
        return None


def messages_cost(messages: Sequence[ModelMessage]) -> float | None:
    """The summed price of the responses among ``messages``; None if any of them cannot be priced."""
    total = 0.0
    for message in messages:
        if isinstance(message, ModelResponse):
            cost = response_cost(message)
            if cost is None:
                return None
            total += cost
    return total


def run_usage(usage: Any, new_messages: Sequence[ModelMessage], *, model: str, role: UsageRole) -> TurnUsage:
    """A run's usage (pydantic-ai's ``RunUsage``) and the price of its responses, as one row."""
    responses = [m for m in new_messages if isinstance(m, ModelResponse)]
    return TurnUsage(
        role=role,
        model=model,
        requests=int(getattr(usage, "requests", 0) or 0),
        input_tokens=int(getattr(usage, "input_tokens", 0) or 0),
        output_tokens=int(getattr(usage, "output_tokens", 0) or 0),
        cache_read_tokens=int(getattr(usage, "cache_read_tokens", 0) or 0),
        cache_write_tokens=int(getattr(usage, "cache_write_tokens", 0) or 0),
        cost_usd=messages_cost(responses) if responses else 0.0,
    )


def response_usage(response: ModelResponse, *, model: str, role: UsageRole) -> TurnUsage:
    usage = response.usage
    return TurnUsage(
        role=role,
        model=model,
        requests=1,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
        cost_usd=response_cost(response),
    )


class UsageMeter(WrapperModel):
    """A model that notes the usage and price of every request it answers (for the summariser, whose
    calls happen inside other code); ``drain`` hands over what was noted since the last call."""

    def __init__(self, wrapped: Model, role: UsageRole) -> None:
        super().__init__(wrapped)
        self.role: UsageRole = role
        self._noted: list[TurnUsage] = []

    async def request(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
    ) -> ModelResponse:
        response = await super().request(messages, model_settings, model_request_parameters)
        self._noted.append(response_usage(response, model=self.model_name, role=self.role))
        return response

    @asynccontextmanager
    async def request_stream(
        self,
        messages: list[ModelMessage],
        model_settings: ModelSettings | None,
        model_request_parameters: ModelRequestParameters,
        run_context: Any = None,
    ) -> AsyncGenerator[StreamedResponse]:
        """A streamed request (the summariser's are), noted once it has been read to its end or abandoned."""
        async with super().request_stream(messages, model_settings, model_request_parameters, run_context) as stream:
            try:
                yield stream
            finally:
                self._noted.append(response_usage(stream.get(), model=self.model_name, role=self.role))

    def drain(self) -> TurnUsage | None:
        """Everything noted since the last drain as one row (None if nothing was)."""
        if not self._noted:
            return None
        noted, self._noted = self._noted, []
        total = TurnUsage(role=self.role, model=noted[0].model, cost_usd=0.0)
        for usage in noted:
            total.requests += usage.requests
            total.input_tokens += usage.input_tokens
            total.output_tokens += usage.output_tokens
            total.cache_read_tokens += usage.cache_read_tokens
            total.cache_write_tokens += usage.cache_write_tokens
            known = usage.cost_usd is not None and total.cost_usd is not None
            total.cost_usd = total.cost_usd + usage.cost_usd if known else None  # type: ignore[operator]
        return total
