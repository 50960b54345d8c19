"""What can go wrong, as values and as typed exceptions.

A candidate that fails is not an exception: its failure is a value in that candidate's slot of
the tune's results (:data:`CandidateError`), and the tune goes on with the others. Only what the
caller must act on is raised, each as a subclass of :class:`WgtuneError`:

- :class:`NoValidKernelFound`: every candidate of a tune failed; it carries each one's reason;
- :class:`KernelError`: raised by a backend for one candidate (compile or launch); the core turns
  it into a :class:`Launch` value;
- :class:`ConfigError`: a bad setting or argument, named;
- :class:`StoreError`: a stored document that cannot be read as what it claims to be.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CandidateError",
    "ConfigError",
    "InvalidSamples",
    "KernelError",
    "Launch",
    "Mismatch",
    "NoValidKernelFound",
    "Skip",
    "StoreError",
    "TuneFailed",
    "Unknown",
    "WgtuneError",
    "error_from_json",
]


@dataclass(frozen=True, slots=True)
class Skip:
    """The candidate was not run: the plan skipped it, or the tune stopped before it."""

    name: str
    reason: str = "not run: an earlier batch of the plan already produced a winner"


@dataclass(frozen=True, slots=True)
class InvalidSamples:
    """Every timed sample of the candidate was unusable (zero, negative or not finite)."""

    name: str
    reason: str = "every timed sample was invalid"


@dataclass(frozen=True, slots=True)
class Unknown:
    """Something unexpected failed while running the candidate."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Launch:
    """The candidate could not be compiled or launched: a WGSL error, a device limit exceeded."""

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Mismatch:
    """Output checks were on and the candidate's output disagreed with the reference's.

    Not in the seed's vocabulary: the seed panics on a mismatch; we disqualify and report.
    """

    name: str
    reason: str


CandidateError = Skip | InvalidSamples | Unknown | Launch | Mismatch

_ERROR_KINDS: dict[str, type] = {
    cls.__name__: cls for cls in (Skip, InvalidSamples, Unknown, Launch, Mismatch)
}


def error_from_json(obj: dict) -> CandidateError:
    """Decode what ``results.result_to_json`` wrote for a failed candidate."""
    cls = _ERROR_KINDS.get(obj.get("error", ""))
    if cls is None:
        raise StoreError(f"unknown candidate error kind {obj.get('error')!r}")
    return cls(name=str(obj["name"]), reason=str(obj["reason"]))


class WgtuneError(Exception):
    """Base of every exception wgtune raises on purpose."""


class KernelError(WgtuneError):
    """One candidate could not be compiled or launched (raised by backends, caught by the core)."""


class ConfigError(WgtuneError, ValueError):
    """A setting, environment variable or argument is not valid; the message names it."""


class StoreError(WgtuneError):
    """A stored or imported document is not a wgtune document, or is damaged."""


class TuneFailed(WgtuneError):
    """A tune stopped for a reason outside any one candidate (the device was lost, say)."""


class NoValidKernelFound(WgtuneError):
    """No candidate of the set worked for the key; ``errors`` holds each candidate's reason."""

    def __init__(self, set_name: str, key: object, errors: tuple[CandidateError, ...]):
        self.set_name = set_name
        self.key = key
        self.errors = errors
        lines = [f"no valid kernel found for {set_name} [{key}]:"]
        lines += [f"  - {error.name}: {type(error).__name__}: {error.reason}" for error in errors]
        super().__init__("\n".join(lines))
