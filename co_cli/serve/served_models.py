"""The models a server answers with: the configured one, and any other a request names that co can resolve."""

from __future__ import annotations

from co_cli.config import LoadedSettings
from co_cli.errors import ModelConfigError
from co_cli.models import ModelChoice, ResolvedModel, choose_model, resolve_choice
from co_cli.serve.errors import ApiError


class ServedModels:
    """The configured model, and any other a request names that co can resolve (each built once)."""

    def __init__(self, loaded: LoadedSettings) -> None:
        self.loaded = loaded
        self.default_choice: ModelChoice = choose_model(loaded.settings, loaded.sources.get("model", "default"))
        self._resolved: dict[str, ResolvedModel] = {}

    @property
    def default_name(self) -> str:
        return self.default_choice.spec

    def names(self) -> list[str]:
        """The models /v1/models lists: the configured one first, then those requests have used."""
        return [self.default_name, *(name for name in self._resolved if name != self.default_name)]

    def resolve(self, name: str | None) -> ResolvedModel:
        """The model a request asked for (None or "co": the configured one); ApiError 404 when co cannot
        resolve the name. The configured one is resolved when the server starts: its ModelConfigError is the
        user's to fix there."""
        key = self.default_name if name in (None, "", "co", self.default_name) else str(name)
        found = self._resolved.get(key)
        if found is not None:
            return found
        settings = self.loaded.settings
        try:
            if key == self.default_name:
                choice = self.default_choice
            else:
                choice = choose_model(settings.model_copy(update={"model": key}), "request")
            resolved = resolve_choice(choice, settings, self.loaded.paths)
        except ModelConfigError as exc:
            if key == self.default_name:
                raise
            raise ApiError(
                404, f"the model {key!r} does not exist or co cannot use it: {exc.message}", "model_not_found"
            ) from None
        self._resolved[key] = resolved
        return resolved
