"""The base of the pipeline's components (normalizers, pre-tokenizers,
processors, decoders): small immutable objects that describe a step, saved
with the tokenizer as ``{"type": NAME, ...}`` and run by the Rust core.

A component holds its settings only; the work happens in Rust, which
receives the whole pipeline as JSON once, when a tokenizer is built.
"""

from __future__ import annotations

from typing import Any, ClassVar


class Component:
    """A pipeline step: its settings, as keyword arguments.

    Subclasses declare ``kind`` (``"normalizer"``, ...) on their family's
    base class and may override ``type_name`` (the ``"type"`` saved in
    files; the class name by default). Their ``__init__`` stores each
    setting as an attribute of the same name, listed in ``_fields``.
    """

    kind: ClassVar[str] = "component"
    type_name: ClassVar[str | None] = None
    _fields: ClassVar[tuple[str, ...]] = ()
    _registry: ClassVar[dict[str, dict[str, type[Component]]]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "kind" in cls.__dict__:
            return  # a family's base class
        name = cls.__dict__.get("type_name") or cls.__name__
        cls.type_name = name
        Component._registry.setdefault(cls.kind, {})[name] = cls

    def to_dict(self) -> dict[str, Any]:
        """The step as saved in tokenizer files: ``{"type": NAME, ...}``."""
        out: dict[str, Any] = {"type": self.type_name}
        for field in self._fields:
            value = getattr(self, field)
            if isinstance(value, Component):
                value = value.to_dict()
            elif isinstance(value, (list, tuple)) and value and isinstance(value[0], Component):
                value = [v.to_dict() for v in value]
            out[field] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Component:
        """The step that :meth:`to_dict` wrote (``cls`` is its family's base
        class). An unknown ``"type"`` is refused, naming it and the known ones."""
        return Component.build(cls.kind, data)

    @staticmethod
    def build(kind: str, data: dict[str, Any]) -> Component:
        """The step of family ``kind`` (``"normalizer"``, ...) that
        :meth:`to_dict` wrote."""
        family = Component._registry.get(kind, {})
        if not isinstance(data, dict) or "type" not in data:
            raise ValueError(f"a {kind} must be an object with a 'type', not {data!r}")
        name = data["type"]
        sub = family.get(name)
        if sub is None:
            known = ", ".join(sorted(family))
            raise ValueError(f"unknown {kind} type {name!r} (polytok knows: {known})")
        settings = {k: v for k, v in data.items() if k != "type"}
        unknown = set(settings) - set(sub._fields)
        if unknown:
            raise ValueError(f"{kind} {name!r}: unknown setting(s) {', '.join(sorted(unknown))}")
        return sub._from_settings(settings)

    @classmethod
    def _from_settings(cls, settings: dict[str, Any]) -> Component:
        """Builds the step from its saved settings (nested steps of a
        sequence are rebuilt by the subclass)."""
        return cls(**settings)

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.to_dict() == self.to_dict()

    def __hash__(self) -> int:
        return hash(repr(self))

    def __repr__(self) -> str:
        args = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._fields)
        return f"{type(self).__name__}({args})"


# Checks of the settings components take, shared by every family: a
# ``TypeError``/``ValueError`` that names the component and the setting.


def check_bool(owner: str, name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be a bool (True or False), not {value!r}")
    return value


def check_str(owner: str, name: str, value: object) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{owner}: {name} must be a str, not {type(value).__name__}")
    return value


def check_char(owner: str, name: str, value: object) -> str:
    text = check_str(owner, name, value)
    if len(text) != 1:
        raise ValueError(f"{owner}: {name} must be one character, not {value!r}")
    return text


def check_count(owner: str, name: str, value: object) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{owner}: {name} must be a whole number, not {value!r}")
    if value < 0:
        raise ValueError(f"{owner}: {name} must be at least 0, not {value}")
    return value


def check_steps(owner: str, name: str, steps: object, family: type[Component]) -> list:
    """The steps of a ``Sequence``: a list (or tuple) of ``family``'s."""
    if isinstance(steps, (str, bytes)) or not isinstance(steps, (list, tuple)):
        raise TypeError(f"{owner}: {name} must be a list, not {type(steps).__name__}")
    for i, step in enumerate(steps):
        if not isinstance(step, family):
            raise TypeError(f"{owner}: {name}[{i}] must be a {family.__name__}, not {type(step).__name__}")
    return list(steps)


def build_steps(owner: str, name: str, settings: dict[str, Any], kind: str) -> list[Component]:
    """The saved steps of a ``Sequence`` (``settings[name]``), rebuilt."""
    steps = settings.get(name)
    if not isinstance(steps, list):
        raise ValueError(f"{owner}: {name} must be a list, not {steps!r}")
    return [Component.build(kind, step) for step in steps]
