"""The free catalogs: models, traits, characters, image styles and RPC networks.

Everything comes from our own small fixture (``x402lab/emulator/fixtures/models.json`` and
``gateway_catalog.json``), written in the upstream shapes. Keys of a ``model_spec`` that start
with ``_`` are the emulator's private notes (how a video is delivered, how long a job takes)
and never leave the server. ``resolve_model`` is the one place that turns a request's model
field into a catalog entry, or into the 400 with a hint the gateway gives.
"""

from __future__ import annotations

import copy
import difflib
import json
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from x402lab.emulator.gateway.errors import GatewayError

MODEL_TYPES = ("text", "image", "video", "music", "tts", "asr", "embedding", "upscale", "inpaint")
LIST_TYPES = ("all", *MODEL_TYPES)


@dataclass(frozen=True)
class Model:
    """One catalog entry: its public JSON and the private notes of the emulator."""

    id: str
    type: str
    public: dict[str, Any]
    private: dict[str, Any] = field(default_factory=dict)

    @property
    def spec(self) -> dict[str, Any]:
        """The public ``model_spec``."""
        return self.public["model_spec"]

    @property
    def name(self) -> str:
        return str(self.spec.get("name", self.id))

    @property
    def pricing(self) -> dict[str, Any] | None:
        """The ``model_spec.pricing`` object, or None for an unpriced model."""
        pricing = self.spec.get("pricing")
        return pricing if isinstance(pricing, dict) and pricing else None

    @property
    def traits(self) -> list[str]:
        return list(self.spec.get("traits", []))

    @property
    def constraints(self) -> dict[str, Any]:
        value = self.spec.get("constraints")
        return value if isinstance(value, dict) else {}


def _load_json(name: str) -> Any:
    text = resources.files("x402lab.emulator").joinpath("fixtures", name).read_text("utf-8")
    return json.loads(text)


class Catalog:
    """The gateway's model catalog and the other free lists, read-only after loading."""

    def __init__(self, models: list[dict[str, Any]], extras: dict[str, Any]) -> None:
        self._models: dict[str, Model] = {}
        for raw in models:
            public = copy.deepcopy(raw)
            spec = public.setdefault("model_spec", {})
            private = {k[1:]: spec.pop(k) for k in list(spec) if k.startswith("_")}
            model = Model(str(public["id"]), str(public["type"]), public, private)
            if model.type not in MODEL_TYPES:
                raise ValueError(f"fixture model {model.id!r} has unknown type {model.type!r}")
            self._models[model.id] = model
        self._characters: list[dict[str, Any]] = list(extras.get("characters", []))
        self._styles: list[str] = list(extras.get("image_styles", []))
        self._networks: dict[str, dict[str, Any]] = {
            n["slug"]: n for n in extras.get("rpc_networks", [])
        }

    @classmethod
    def from_fixtures(cls) -> Catalog:
        """The catalog of the packaged fixtures (loaded once per process)."""
        return _fixture_catalog()

    # -- models ------------------------------------------------------------------------------

    def all_models(self, type: str = "all") -> list[Model]:
        """Catalog entries of ``type`` ("all" for every type), in fixture order."""
        return [m for m in self._models.values() if type == "all" or m.type == type]

    def models_response(self, type: str = "all") -> dict[str, Any]:
        """The body of GET /api/v1/models?type=... (upstream shape: data, object, type)."""
        data = [copy.deepcopy(m.public) for m in self.all_models(type)]
        return {"data": data, "object": "list", "type": type}

    def get(self, model_id: str) -> Model | None:
        return self._models.get(model_id)

    def traits(self, type: str = "text") -> dict[str, str]:
        """Trait name to model id, for models of ``type`` (the first model with a trait wins)."""
        mapping: dict[str, str] = {}
        for model in self.all_models(type):
            for trait in model.traits:
                mapping.setdefault(trait, model.id)
        return mapping

    def first_with_trait(self, type: str, trait: str) -> Model:
        """The model of ``type`` holding ``trait`` (for routes whose body has no model)."""
        model_id = self.traits(type).get(trait)
        if model_id is None:
            raise LookupError(f"no {type} model with trait {trait!r} in the fixture")
        return self._models[model_id]

    def close_ids(self, wanted: str, types: tuple[str, ...] | None = None) -> list[str]:
        """Up to three catalog ids that look like ``wanted`` (for hints)."""
        ids = [m.id for m in self._models.values() if types is None or m.type in types]
        close = difflib.get_close_matches(wanted, ids, n=3, cutoff=0.4)
        if not close:
            lowered = wanted.lower()
            close = [i for i in ids if lowered and (lowered in i or i in lowered)][:3]
        return close

    def resolve_model(
        self, value: object, types: tuple[str, ...], *, field_name: str = "model"
    ) -> Model:
        """The priced catalog model named by ``value``, which must be of one of ``types``.

        Raises GatewayError 400 (model_required, model_not_found, model_wrong_type or
        model_unpriced) with a hint naming close or valid ids. Never substitutes a model.
        """
        kinds = "/".join(types)
        listing = f"GET /api/v1/models?type={types[0]}"
        if value is None or value == "":
            examples = ", ".join(m.id for m in self.all_models(types[0])[:3])
            raise GatewayError(
                400,
                "model_required",
                f"{field_name} is required: send an exact {kinds} model id",
                hint=f"pick an id from {listing} (for example {examples})",
            )
        if not isinstance(value, str):
            raise GatewayError(
                400,
                "model_required",
                f"{field_name} must be a string model id",
                hint=f"pick an id from {listing}",
            )
        model = self._models.get(value)
        if model is None:
            close = self.close_ids(value, types)
            hint = f"did you mean {', '.join(close)}?" if close else f"see {listing}"
            raise GatewayError(
                400,
                "model_not_found",
                f"unknown model {value!r}",
                hint=hint,
                suggestions=close,
            )
        if model.type not in types:
            examples = ", ".join(m.id for m in self.all_models(types[0])[:3])
            raise GatewayError(
                400,
                "model_wrong_type",
                f"model {value!r} is a {model.type} model; this route takes {kinds} models",
                hint=f"pick an id from {listing} (for example {examples})",
            )
        if model.pricing is None:
            priced = [m.id for m in self.all_models(model.type) if m.pricing is not None][:3]
            raise GatewayError(
                400,
                "model_unpriced",
                f"model {value!r} has no price yet; the gateway does not sell it",
                hint=f"priced {model.type} models: {', '.join(priced)}",
            )
        return model

    # -- other free lists --------------------------------------------------------------------

    def characters(self) -> list[dict[str, Any]]:
        return copy.deepcopy(self._characters)

    def character(self, slug: str) -> dict[str, Any] | None:
        for character in self._characters:
            if character.get("slug") == slug:
                return copy.deepcopy(character)
        return None

    def image_styles(self) -> list[str]:
        return list(self._styles)

    def network_slugs(self) -> list[str]:
        return list(self._networks)

    def network(self, slug: str) -> dict[str, Any] | None:
        return self._networks.get(slug)


@cache
def _fixture_catalog() -> Catalog:
    return Catalog(_load_json("models.json"), _load_json("gateway_catalog.json"))
