"""What can go wrong, as values and as typed exceptions.

A candidate that fails is not an exception: its failure is a value in that candidate's slot of
the tune's results (:data:`CandidateError`), and the tune goes on with the others. Only what the
caller must act on is raised, each as a subclass of :class:`WgtuneError`:

- :class:`NoValidKernelFound`: every candidate of a tune failed; it carries each one's reason;
- :class:`KernelError`: raised by a backend for one candidate (compile or launch); the core turns
  it into a :class:`Launch` value;
- :class:`LaunchRefused` (a KernelError): WebGPU refuses to launch a candidate on a call's own
  buffers or grid; raised by ``Tuner.execute`` for that call (in a tune, a Launch value like any
  KernelError);
- :class:`ConfigError`: a bad setting or argument, named;
- :class:`StoreError`: a stored document that cannot be read as what it claims to be;
- :class:`TuneFailed`: a tune stopped for a reason outside any one candidate;
- :class:`DeviceLost`: the device is gone, and with it the tune (the page reopens one).

Whether an exception is one candidate's failure or the whole tune's is decided in one place,
:func:`candidate_failure`. A key's state moving in a way its owner forbids is a bug in wgtune
and raises :class:`IllegalTransition`.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "CandidateError",
    "ConfigError",
    "DeviceLost",
    "IllegalTransition",
    "InvalidSamples",
    "KernelError",
    "Launch",
    "LaunchRefused",
    "Mismatch",
    "NoValidKernelFound",
    "Skip",
    "StoreError",
    "Timeout",
    "TuneFailed",
    "Unknown",
    "WgtuneError",
    "candidate_failure",
    "error_from_json",
    "tune_failure",
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

    CubeCL's tuner panics on a mismatch; wgtune disqualifies the candidate and says why.
    """

    name: str
    reason: str


@dataclass(frozen=True, slots=True)
class Timeout:
    """A launch of the candidate ran past the tune's time limit (``time_limit.py``): it is out,
    and the tune goes on with the others."""

    name: str
    reason: str


CandidateError = Skip | InvalidSamples | Unknown | Launch | Mismatch | Timeout

_ERROR_KINDS: dict[str, type] = {
    cls.__name__: cls for cls in (Skip, InvalidSamples, Unknown, Launch, Mismatch, Timeout)
}


MAX_KIND = 64
"""A failure kind this wgtune does not know is read as :class:`Unknown` when it is a name of at most
this many characters (one a later wgtune of the same line wrote: it shares the namespace)."""


def error_from_json(obj: dict) -> CandidateError:
    """Decode what ``results.result_to_json`` wrote for a failed candidate. A kind this wgtune does
    not know, written as a class name (a later patch release's, in the same namespace), is an
    :class:`Unknown` whose reason names it: the entry's winner still serves, and is not set aside
    as damaged for a release that reads it. Any other kind: StoreError."""
    kind = obj.get("error", "")
    cls = _ERROR_KINDS.get(kind)
    if cls is not None:
        return cls(name=str(obj["name"]), reason=str(obj["reason"]))
    if isinstance(kind, str) and kind.isidentifier() and kind.isascii() and len(kind) <= MAX_KIND:
        return Unknown(name=str(obj["name"]), reason=f"{kind}: {obj['reason']}")
    raise StoreError(f"unknown candidate error kind {kind!r}")


class WgtuneError(Exception):
    """Base of every exception wgtune raises on purpose."""


class KernelError(WgtuneError):
    """One candidate could not be compiled or launched (raised by backends, caught by the core)."""


class LaunchRefused(KernelError):
    """WebGPU refuses to launch a candidate on the call's buffers: a buffer without STORAGE usage
    (UNIFORM for a uniform), smaller than its binding needs or not whole 4-byte words, destroyed,
    made by another GPUDevice, or a grid over the device's workgroups per dimension. The message
    names the binding where wgtune can tell which (``launch_check.py``), else gives WebGPU's own
    words and the bindings of the launch.

    An error of the call that caused it, never of a later one: ``Tuner.execute`` raises it (the
    browser's ``set.execute`` rejects with it), and nothing of it is left for another call or
    tune to find. In a tune it is the candidate's :class:`Launch` value, like any KernelError."""


class ConfigError(WgtuneError, ValueError):
    """A setting, environment variable or argument is not valid; the message names it, and
    ``field`` (where one is given) is the name of the field or param that is wrong."""

    def __init__(self, *args: object, field: str | None = None) -> None:
        super().__init__(*args)
        self.field = field


class StoreError(WgtuneError):
    """A stored or imported document is not a wgtune document, or is damaged."""


class TuneFailed(WgtuneError):
    """A tune stopped for a reason outside any one candidate (the device was lost, say)."""


class DeviceLost(WgtuneError):
    """The GPU device was lost (a driver reset, a browser's GPU watchdog, ``destroy()``): nothing
    more runs on it. ``reason`` is the device's own word on why; ``candidate`` names the candidate
    whose launches were running when it was found lost, the likely cause, or is None; ``during``
    says which of its launches (its first launch, alone: the likeliest; its warmups and
    calibration; its timed samples)."""

    def __init__(self, reason: str, candidate: str | None = None, during: str = "the first launch") -> None:
        said = "" if candidate is None else f" (during {during} of {candidate})"
        super().__init__(f"the GPU device was lost: {reason}{said}")
        self.reason = reason
        self.candidate = candidate
        self.during = during

    def naming(self, candidate: str, during: str) -> DeviceLost:
        """This loss, naming ``candidate``, whose launches (``during``) were in hand when it was
        found, where it names none yet (an inner step that found it may have named one)."""
        return self if self.candidate is not None else DeviceLost(self.reason, candidate, during)

    @property
    def its_launches(self) -> str:
        """Which of the candidate's launches, said of it: what a rule-out after the loss says."""
        return "its first launch" if self.during == "the first launch" else f"{self.during} of it"


class NoValidKernelFound(WgtuneError):
    """No candidate of the set worked for the key; ``errors`` holds each candidate's reason.
    ``key`` is None where the failure is of no one key: the set has no fallback (none of its
    candidates compiles, or every one was found wrong); the message says ``[fallback]`` then."""

    def __init__(self, set_name: str, key: object, errors: tuple[CandidateError, ...]):
        self.set_name = set_name
        self.key = key
        self.errors = errors
        where = "fallback" if key is None else key
        reasons = {(type(error).__name__, error.reason) for error in errors}
        if len(errors) > 1 and len(reasons) == 1:  # the call itself is wrong (its buffers, its params)
            kind, reason = reasons.pop()
            super().__init__(f"no valid kernel found for {set_name} [{where}]: every candidate failed on this call: "
                             f"{kind}: {reason}")
            return
        lines = [f"no valid kernel found for {set_name} [{where}]:"]
        lines += [f"  - {error.name}: {type(error).__name__}: {error.reason}" for error in errors]
        super().__init__("\n".join(lines))


class IllegalTransition(WgtuneError, RuntimeError):
    """A key's state was asked to move in a way the tune cache forbids: a bug in wgtune."""


# What each step of running a candidate says of a KernelError (the device refused the candidate)
# and of any other exception (a bug of the candidate's).
_STEP_REASONS = {
    "compile": ("compile failed: {error}", "compile raised {kind}: {error}"),
    "launch": ("launch failed: {error}", "{kind}: {error}"),
}


def candidate_failure(name: str, error: BaseException, step: str) -> CandidateError:
    """Candidate ``name``'s failure for ``error``, raised while wgtune did ``step`` to it
    (``"compile"``, ``"grid"`` or ``"launch"``); re-raises an error that belongs to the whole tune.

    A :class:`KernelError` is the device refusing this candidate: a :class:`Launch` value. Any
    other wgtune error (a bad setting, a failed store) and anything that is not an
    :class:`Exception` (a cancelled task, Ctrl-C) stop the tune. Any other exception is the
    candidate's own bug: an :class:`Unknown` value, and the tune goes on with the others. A grid
    function is the candidate's own code through and through: whatever it raises is its failure.
    """
    if not isinstance(error, Exception):
        raise error
    if step == "grid":
        return Unknown(name, f"grid function failed: {type(error).__name__}: {error}")
    kernel_reason, other_reason = _STEP_REASONS[step]
    if isinstance(error, KernelError):
        return Launch(name, kernel_reason.format(error=error))
    if isinstance(error, WgtuneError):
        raise error
    return Unknown(name, other_reason.format(kind=type(error).__name__, error=error))


def tune_failure(set_name: str, key: object, error: BaseException) -> BaseException:
    """What a failed tune of ``set_name`` [``key``] reports for ``error``: wgtune's own errors as
    they are, anything else as a :class:`TuneFailed` naming it.

    A KernelError that reaches this far did not come from one candidate (those are values) but
    from the device as a whole, before the tune (work submitted earlier) or around it.
    """
    if isinstance(error, GeneratorExit):  # closed mid-tune: run_inline met a device that suspends
        return RuntimeError("the tune was stopped before it finished: its coroutine was closed")
    if not isinstance(error, Exception) or (isinstance(error, WgtuneError) and not isinstance(error, KernelError)):
        return error
    return TuneFailed(f"tune of {set_name} [{key}] failed: {type(error).__name__}: {error}")
