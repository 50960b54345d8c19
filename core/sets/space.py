"""Parameter spaces: a family of candidates from one WGSL source and lists of parameter values.

Kernels from other projects are rarely one fixed source: their tile sizes, workgroup sizes and
unroll factors are WGSL ``override`` constants, or holes a template engine fills in. A
:class:`Space` turns such a kernel into candidates without hand-building each :class:`Kernel`::

    space = Space(
        "scale",
        source=WGSL,                                   # with `override WG: u32;` ... declarations
        params={"WG": [64, 128, 256], "PER_THREAD": [1, 2, 4]},
        default={"WG": 64, "PER_THREAD": 1},           # your configuration: candidate 0
        restrict=lambda p: p["WG"] * p["PER_THREAD"] <= 512,
        workgroup_size=lambda p: (p["WG"], 1, 1),
        grid=lambda p, args: (ceil(args.params[0] / (p["WG"] * p["PER_THREAD"])), 1, 1),
    )
    tunables = TunableSet("scale", space.candidates(), key=...)

One point of the space is one candidate: every combination of the listed values that the
restrictions admit, in the order the lists give (the last parameter varies fastest), after the
``default`` configuration, which is candidate 0 (the fallback while a tune is pending, and the
reference of output checks unless the set has a ``reference``). Candidates are named after their
values (``scale[WG=64,PER_THREAD=1]``), so a stored winner says what it is.

The WGSL comes either from ``source``, whose ``override`` declarations receive the parameters
of the same names as pipeline constants (``Kernel.constants``, keyed as WebGPU keys them: by the
``@id`` of an override that has one), or from ``render(params)``, a
function that returns the WGSL for one configuration: any template engine (``string.Template``,
Jinja, a C-preprocessor-style renderer) fits behind it. ``constants(params)`` overrides either
choice of constants.

Spaces are enumerated whole (every admitted configuration is a Kernel, made in microseconds; a
renderer's time comes on top), up to :data:`MAX_CANDIDATES` of them; a larger one is refused
with a message that says so. A set of more than ``tunable.EXHAUSTIVE_LIMIT`` (10,000) needs a
:class:`~wgtune.search.strategies.Search`: a tune then measures a budget of them, not each one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from ..errors import ConfigError
from ..wgsl.declarations import WgslError, reflect
from .args import Args, Grid
from .tunable import Kernel

__all__ = ["MAX_CANDIDATES", "Space"]

MAX_CANDIDATES = 100_000
"""The most configurations :meth:`Space.candidates` makes."""

Params = Mapping[str, Any]
Restriction = Callable[[Params], bool]

@dataclass(frozen=True)
class Space:
    """Candidates from one WGSL source (or renderer) and parameter lists (see the module doc).

    ``params`` maps each parameter's name to the values it takes. ``default`` is one value per
    parameter: candidate 0 (it need not be in the lists, but must pass the restrictions).
    ``restrict`` is a function of a configuration (or a sequence of them) that says whether it is
    valid. ``grid`` gives a configuration's workgroups for a call's Args. ``workgroup_size`` and
    ``workgroup_storage`` are read from the WGSL unless given (per configuration, or one value for
    all), as for any :class:`Kernel`. ``features``, ``entry_point`` and ``runtime_checks`` (False:
    compiled without WebGPU's runtime checks where the device can, ``Kernel.runtime_checks``) are
    every candidate's.
    """

    name: str
    params: Mapping[str, Sequence[Any]]
    default: Params
    grid: Callable[[Params, Args], Grid]
    source: str | None = None
    render: Callable[[Params], str] | None = None
    restrict: Restriction | Sequence[Restriction] = ()
    workgroup_size: Grid | Callable[[Params], Sequence[int]] | None = None
    workgroup_storage: int | Callable[[Params], int] | None = None
    constants: Callable[[Params], Mapping[str, int | float | bool]] | None = None
    features: tuple[str, ...] = ()
    entry_point: str = "main"
    runtime_checks: bool = True
    _restrictions: tuple[Restriction, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ConfigError(f"a space needs a non-empty name, got {self.name!r}")
        if (self.source is None) == (self.render is None):
            raise ConfigError(f"space {self.name!r}: give either source= (WGSL with overrides) or render=")
        if self.render is not None and not callable(self.render):
            raise ConfigError(f"space {self.name!r}: render must be a function of the parameters")
        if not isinstance(self.params, Mapping) or not self.params:
            raise ConfigError(f"space {self.name!r}: params must map each parameter's name to its values")
        for param, values in self.params.items():
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence) or not values:
                raise ConfigError(f"space {self.name!r}: parameter {param!r} needs a non-empty list of values")
        missing = sorted(set(self.params) - set(self.default))
        extra = sorted(set(self.default) - set(self.params))
        if missing or extra:
            raise ConfigError(f"space {self.name!r}: default must give each parameter once "
                              f"(missing {missing}, unknown {extra})")
        restrictions = (self.restrict,) if callable(self.restrict) else tuple(self.restrict)
        if not all(callable(rule) for rule in restrictions):
            raise ConfigError(f"space {self.name!r}: restrict must be a function of the parameters, or a list of them")
        object.__setattr__(self, "_restrictions", restrictions)
        if not self.admits(self.default):
            raise ConfigError(f"space {self.name!r}: the default {dict(self.default)} does not pass the restrictions")

    def admits(self, params: Params) -> bool:
        """Whether a configuration passes every restriction; a restriction that raises is a
        ConfigError naming the configuration."""
        for rule in self._restrictions:
            try:
                if not rule(params):
                    return False
            except Exception as error:
                raise ConfigError(f"space {self.name!r}: a restriction raised {type(error).__name__}: {error} "
                                  f"for {dict(params)}") from error
        return True

    def configurations(self) -> Iterator[dict[str, Any]]:
        """The default, then every other admitted combination of the listed values, in order."""
        default = dict(self.default)
        yield default
        names = list(self.params)
        for values in itertools.product(*(self.params[name] for name in names)):
            point = dict(zip(names, values, strict=True))
            if point != default and self.admits(point):
                yield point

    def kernel(self, params: Params) -> Kernel:
        """The candidate of one configuration."""
        params = dict(params)
        label = f"{self.name}[{','.join(f'{name}={value}' for name, value in params.items())}]"
        wgsl = self._wgsl(label, params)
        return Kernel(
            label,
            wgsl,
            grid=lambda args, params=params: self.grid(params, args),
            workgroup_size=_three(self._each(self.workgroup_size, params)),
            workgroup_storage=self._each(self.workgroup_storage, params),
            entry_point=self.entry_point,
            features=self.features,
            constants=self._constants(label, wgsl, params),
            configuration=params,
            runtime_checks=self.runtime_checks,
        )

    def candidates(self, limit: int = MAX_CANDIDATES) -> list[Kernel]:
        """Every admitted configuration's candidate, the default first (see the module doc)."""
        found: list[Kernel] = []
        for params in self.configurations():
            if len(found) == limit:
                raise ConfigError(
                    f"space {self.name!r} has more than {limit} valid configurations: restrict it, or list "
                    "fewer values"
                )
            found.append(self.kernel(params))
        return found

    # -- one configuration ------------------------------------------------------------------------

    @staticmethod
    def _each(value: Any, params: dict[str, Any]) -> Any:
        """A per-configuration setting: a function of the parameters, or one value for all."""
        return value(params) if callable(value) else value

    def _wgsl(self, label: str, params: dict[str, Any]) -> str:
        if self.render is None:
            return self.source
        try:
            wgsl = self.render(params)
        except Exception as error:
            raise ConfigError(f"{label}: render raised {type(error).__name__}: {error}") from error
        if not isinstance(wgsl, str):
            raise ConfigError(f"{label}: render must return the WGSL as a str, got {type(wgsl).__name__}")
        return wgsl

    def _constants(self, label: str, wgsl: str, params: dict[str, Any]) -> dict[str, Any]:
        if self.constants is not None:
            return dict(self.constants(params))
        if self.render is not None:
            return {}  # a renderer bakes the values into the source
        keys = self._override_keys  # WebGPU keys an override with an @id by that id
        unused = sorted(name for name in params if name not in keys)
        if unused:
            raise ConfigError(f"{label}: the source declares no override {', '.join(unused)}; name each parameter "
                              "after an `override` of the source, or give constants=")
        return {keys[name]: value for name, value in params.items()}

    @cached_property
    def _override_keys(self) -> dict[str, str]:
        """Each ``override`` of the source by name, with the key WebGPU's ``constants`` take for it."""
        try:
            shader = reflect(self.source)
        except WgslError as error:
            raise ConfigError(f"space {self.name!r}: its source cannot be read for its overrides: {error}") from None
        return {override.name: override.key for override in shader.overrides}


def _three(size: Sequence[int] | None) -> tuple[int, ...] | None:
    """A workgroup size of one to three dimensions as three (``(64,)`` is ``(64, 1, 1)``)."""
    if size is None:
        return None
    size = tuple(size)
    return size + (1,) * (3 - len(size)) if 1 <= len(size) <= 3 else size
