"""Output checks: only a candidate that gives the right answer on this device may win.

On by default (``Config.checks``). Each candidate runs once more on fresh copies of the
benchmark's inputs (so kernels that write in place cannot skew one another), its outputs
starting as a poison pattern where no candidate reads them first (``output_types.py``: an element
left unwritten shows), and each output is compared with the judge's as values of its WGSL
element type, on the GPU where the device can (``Device.compare_buffers``).

Who judges, one rule:

- the set's ``reference`` when it has one: the expected outputs computed on the host from the
  check's inputs, so every candidate, the first one and the only one too, is held to it, and a
  verdict comes before the candidate is sampled;
- otherwise the candidates judge each other: each joins the group of candidates whose outputs
  it agrees with (:class:`Agreement`), and once every candidate has run (the adaptive policy
  asks after screening, before its rounds) the largest group is right; the rest are Mismatch.
  Where groups tie for largest, nothing says which is right: every one of them is a Mismatch
  that says so (give the set a reference). A group that left elements of a float output
  unwritten (they still hold the poison's bits) ranks below a group that wrote them all and
  agrees with it everywhere else, whatever their sizes: candidates often come in families that
  share a bug (a vec4 tail left unwritten at every workgroup size), and two of them leaving the
  same elements unwritten agree there, which would outvote the one right candidate. Where no
  group completes it so (a scatter that leaves elements as they were, by design; values that
  differ where both wrote) the largest group is right, as before. Candidate 0 is one voter
  among the others: where it is outside the largest group, :attr:`OutputCheck.warning` says so,
  and the tuner stops using it as the set's fallback.

A reference that returns the wrong number of outputs, values of the wrong kind (floats for a
u32 output) or the wrong size fails the tune with a :class:`~wgtune.errors.TuneFailed` naming
the buffer.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from ..errors import ConfigError, KernelError, Mismatch, TuneFailed
from ..gpu.comparison import Comparison, element_size
from ..gpu.device import Device
from ..sets.args import Args
from ..sets.bindings import binding_plan
from ..sets.output_types import OutputSpec, output_specs
from ..sets.shaders import shader_of
from ..sets.tunable import TunableSet
from .expected import as_bytes
from .measure import clone_written
from .pipelines import PipelineCache

__all__ = ["MAX_GROUPS", "Agreement", "OutputCheck"]

MAX_GROUPS = 8
"""Groups of disagreeing candidates whose outputs a tune keeps on the device to compare with: a
candidate agreeing with none of them past that is a group of one without outputs kept (it can
only be outvoted)."""
POISON = 0xFF
"""Each byte of an output's poison pattern: NaN as f32 and f16, -1 as i32, the largest u32."""
# The float outputs whose poison no kernel writes by chance (a NaN it computes has other bits; -1
# and the largest u32 are common values), and the integers their bits are compared as.
_BITS_OF = {"f": "I", "e": "H"}


@dataclass(eq=False)
class _Group:
    members: list[int]
    outputs: list[Any] | None  # the first member's output buffers, kept to compare with
    unwritten: tuple[str, int] | None = None  # the first float output it left partly unwritten; how many in all


@dataclass
class Agreement:
    """Candidates grouped by the outputs they agree on (see the module doc)."""

    groups: list[_Group] = field(default_factory=list)

    def of(self, index: int) -> _Group | None:
        return next((group for group in self.groups if index in group.members), None)


class OutputCheck:
    """Checks the candidates of one tune (see the module doc). Made before the sampling, on the
    benchmark's ``args``; only the candidates that run are checked, and only they vote."""

    def __init__(
        self, device: Device, tunables: TunableSet, args: Args, pipelines: PipelineCache,
        among: Collection[int] | None = None, written: set[int] | None = None,
    ) -> None:
        """``among``: the candidates the tune may run (None: every one); only their WGSL says which
        buffers a check run must have copies of. ``written``: those buffers, where the tune has
        already worked them out (``written_buffers`` of the same ``among``)."""
        bad = [index for index in tunables.outputs if isinstance(index, int) and not 0 <= index < len(args.buffers)]
        if bad:
            raise ConfigError(
                f"tunable set {tunables.name!r}: outputs {bad} are not buffers of a call with {len(args.buffers)}"
            )
        self.device = device
        self.tunables = tunables
        self.pipelines = pipelines
        self.specs: tuple[OutputSpec, ...] = output_specs(tunables, args)
        # What every check run starts from, copied now: the sampling may write the benchmark's buffers
        # a candidate binds read_write; the others no candidate of the tune writes, so they are shared
        # (natively the call's own inputs: a tune copies none of them).
        self._written = written_buffers(tunables, args, among) if written is None else written
        buffers = list(clone_written(device, args, self._written).buffers)
        for spec in self.specs:
            if spec.poison:
                buffers[spec.index] = device.create_buffer(bytes([POISON]) * args.buffers[spec.index].size)
        self.start = args.with_buffers(buffers)
        self._spare: list[Args] = []  # check runs done with, their buffers free to run the next candidate on
        self.expected: list[Any] | None = None  # the reference's outputs, on the device
        self._sizes: list[int] = []  # bytes of each of them
        self.warning: str | None = None
        """Set by :meth:`judge_all` where the set's default (candidate 0) was found wrong."""
        self.agreement = Agreement()
        self.verdicts: dict[int, Mismatch] = {}
        # _completes' answers by (whole, partial) group: judge_all runs after screening and again at
        # the end, and a group's outputs (its first member's) never change once it exists.
        self._completions: dict[tuple[int, int], bool] = {}

    @property
    def judge(self) -> str:
        """``"reference"`` or ``"agreement"``: who decides what is right in this tune."""
        return "reference" if self.tunables.reference is not None else "agreement"

    def fresh_args(self) -> Args:
        """A fresh copy of the check's inputs (outputs poisoned) for one candidate to run on: the
        tune's first launch of a candidate runs on it, so that the check costs no launch of its own.
        Buffers no candidate can write (bound read-only in every stage) are shared, not copied; the
        others are copied into the buffers of a run done with where there is one (no new buffers,
        no new uniform), else into new ones."""
        if self._spare:
            args = self._spare.pop()
            for index in self._written:
                self.device.copy_buffer(self.start.buffers[index], args.buffers[index])
            return args
        return clone_written(self.device, self.start, self._written)

    def _done_with(self, ran: Args) -> None:
        """``ran``'s buffers may take the next candidate's run, where the device can refill them.
        Its scratch buffers are not passed on: a candidate may count on fresh (zeroed) ones."""
        if type(self.device).copy_buffer is not Device.copy_buffer:
            for made in [made for made in ran.cache if isinstance(made, tuple) and made[:1] == ("scratch",)]:
                del ran.cache[made]
            self._spare.append(ran)

    async def _run(self, index: int) -> Args:
        """Candidate ``index`` run on :meth:`fresh_args`."""
        kernel = self.tunables.candidates[index]
        pipeline = await self.pipelines.compile(self.tunables, index)
        args = self.fresh_args()
        self.device.dispatch(pipeline, args, tuple(kernel.grid(args)))
        return args

    async def _compare(self, got: list[Any], want: list[Any], sizes: list[int] | None = None) -> tuple[int, Comparison]:
        """The first output that disagrees and how, else ``(-1, the last comparison)``; ``sizes``:
        bytes of each output to compare (default: the whole of ``want``'s buffer)."""
        comparison = Comparison(0, 0)
        for slot, spec in enumerate(self.specs):
            nbytes = sizes[slot] if sizes is not None else want[slot].size
            count = nbytes // element_size(spec.typecode)
            comparison = await self.device.compare_buffers(got[slot], want[slot], spec.typecode, count,
                                                           spec.atol, spec.rtol)
            if not comparison.agree:
                return slot, comparison
        return -1, comparison

    async def mismatch(self, index: int, ran: Args | None = None) -> Mismatch | None:
        """Check candidate ``index`` as it is prepared: against the reference, its verdict (a
        Mismatch, or None); judged by agreement, None (it joins its group; :meth:`judge_all`
        gives the verdicts once every candidate has run). ``ran``: the :meth:`fresh_args` the
        candidate already ran on (its first launch); without it, it is run here."""
        ran = ran if ran is not None else await self._run(index)
        outputs = [ran.buffers[spec.index] for spec in self.specs]
        if self.tunables.reference is not None:
            if self.expected is None:
                self.expected, self._sizes = await self._expected()
            slot, comparison = await self._compare(outputs, self.expected, self._sizes)
            self._done_with(ran)
            if slot < 0:
                return None
            verdict = Mismatch(self.tunables.candidates[index].name,
                               f"output {self.specs[slot].label} disagrees with the reference: {comparison.describe()}"
                               + self._poison_note(slot, comparison))
            self.verdicts[index] = verdict
            return verdict
        for group in self.agreement.groups:
            if group.outputs is not None and (await self._compare(outputs, group.outputs))[0] < 0:
                group.members.append(index)
                self._done_with(ran)
                return None
        kept = outputs if sum(group.outputs is not None for group in self.agreement.groups) < MAX_GROUPS else None
        self.agreement.groups.append(_Group([index], kept, await self._unwritten(outputs)))
        if kept is None:
            self._done_with(ran)
        return None

    async def _unwritten(self, outputs: list[Any]) -> tuple[str, int] | None:
        """The first poisoned float output of ``outputs`` (a candidate's) that still holds the
        poison's bits somewhere, and how many elements of all of them do; None where it wrote them
        all. Compared as integers, bit for bit: a NaN the kernel computed is written."""
        first, total = None, 0
        for slot, spec in enumerate(self.specs):
            bits = _BITS_OF.get(spec.typecode)
            if not spec.poison or bits is None:
                continue
            poison = self.start.buffers[spec.index]
            count = poison.size // element_size(bits)
            comparison = await self.device.compare_buffers(outputs[slot], poison, bits, count, 0.0, 0.0)
            if comparison.mismatches < count:
                first = first or spec.label
                total += count - comparison.mismatches
        return None if first is None else (first, total)

    async def _completes(self, whole: _Group, partial: _Group) -> bool:
        """Whether ``whole`` (which wrote all its float outputs) disagrees with ``partial`` only
        where ``partial`` left elements unwritten: no more disagreements than it has of those."""
        if whole.outputs is None or partial.outputs is None or partial.unwritten is None:
            return False
        pair = (id(whole), id(partial))
        if pair not in self._completions:
            self._completions[pair] = await self._disagreements(whole, partial) <= partial.unwritten[1]
        return self._completions[pair]

    async def _disagreements(self, whole: _Group, partial: _Group) -> int:
        assert whole.outputs is not None and partial.outputs is not None
        disagreements = 0
        for slot, spec in enumerate(self.specs):
            count = whole.outputs[slot].size // element_size(spec.typecode)
            comparison = await self.device.compare_buffers(partial.outputs[slot], whole.outputs[slot], spec.typecode,
                                                           count, spec.atol, spec.rtol)
            disagreements += comparison.mismatches
        return disagreements

    async def judge_all(self) -> dict[int, Mismatch]:
        """The verdicts of a tune judged by agreement, once every candidate has run: a Mismatch
        for every candidate outside the largest group, a group that left float outputs partly
        unwritten ranking below one that wrote them and agrees elsewhere (see the module doc).
        Against a reference, the verdicts given. Either way, sets :attr:`warning` when candidate 0
        is among them (the tuner then stops using it as the set's fallback)."""
        if self.tunables.reference is None and len(self.agreement.groups) >= 2:
            await self._outvote()
        if 0 in self.verdicts:
            names = self.tunables.candidates
            self.warning = f"candidate 0 ({names[0].name}), the set's default, is wrong here: {self.verdicts[0].reason}"
        return dict(self.verdicts)

    async def _outvote(self) -> None:
        """The verdicts of a tune judged by agreement (:meth:`judge_all`)."""
        whole = [group for group in self.agreement.groups if group.unwritten is None]
        completed = []
        for group in self.agreement.groups:
            for other in whole if group.unwritten is not None else ():
                if await self._completes(other, group):
                    completed.append(group)
                    break

        def rank(group: _Group) -> tuple[bool, int]:
            return group in completed, -len(group.members)

        groups = sorted(self.agreement.groups, key=rank)
        names = self.tunables.candidates
        largest = [group for group in groups if rank(group) == rank(groups[0])]
        if len(largest) > 1:
            sides = " against ".join("{" + ", ".join(names[i].name for i in group.members) + "}" for group in largest)
            for group in groups:
                reason = (f"the candidates disagree, {sides}, and no group is larger: nothing says which is right "
                          "(give the set a reference=)") if group in largest else self._outvoted(groups[0], None)
                for index in group.members:
                    self.verdicts[index] = Mismatch(names[index].name, reason)
        else:
            right = largest[0]
            for group in groups[1:]:
                comparison = None
                if group.outputs is not None and right.outputs is not None:
                    comparison = await self._compare(group.outputs, right.outputs)
                reason = self._outvoted(right, comparison)
                if group in completed:
                    label, count = group.unwritten
                    reason += (f"; it left {count} values unwritten (output {label} first: they kept the check's "
                               "poison), which others wrote, agreeing with it everywhere else")
                for index in group.members:
                    self.verdicts[index] = Mismatch(names[index].name, reason)

    def _outvoted(self, right: _Group, comparison: tuple[int, Comparison] | None) -> str:
        shown = ", ".join(self.tunables.candidates[i].name for i in right.members[:5])
        more = f" and {len(right.members) - 5} more" if len(right.members) > 5 else ""
        text = f"disagrees with the {len(right.members)} candidates that agree ({shown}{more})"
        if comparison is not None and comparison[0] >= 0:
            slot, how = comparison
            text += f": output {self.specs[slot].label}: {how.describe()}" + self._poison_note(slot, how)
        return text

    def _poison_note(self, slot: int, comparison: Comparison) -> str:
        """Why a candidate's NaN in a poisoned output may be the check's own: it started as NaN bits."""
        spec = self.specs[slot]
        if not spec.poison or not isinstance(comparison.got, float) or not math.isnan(comparison.got):
            return ""
        return (f" (the check starts output {spec.label} as NaN bits, since no candidate reads it before writing "
                "it: an element left unwritten, or read before any stage wrote it, is NaN there)")

    async def _expected(self) -> tuple[list[Any], list[int]]:
        """The set's reference outputs for the check's inputs, on the device, and their sizes in
        bytes; a TuneFailed naming what is wrong with them (the whole tune depends on them)."""
        name = self.tunables.name
        inputs = [await self.device.read_buffer(buffer) for buffer in self.start.buffers]
        try:
            produced = list(self.tunables.reference(inputs, self.start.params))
        except Exception as error:
            raise TuneFailed(f"the reference of {name} raised {type(error).__name__}: {error}") from error
        if len(produced) != len(self.specs):
            raise TuneFailed(f"the reference of {name} gave {len(produced)} outputs; the set has {len(self.specs)}: "
                             + ", ".join(spec.label for spec in self.specs))
        on_device, sizes = [], []
        for spec, value in zip(self.specs, produced, strict=True):
            size = self.start.buffers[spec.index].size
            data = as_bytes(value, spec, size, f"the reference of {name}")
            sizes.append(len(data))
            on_device.append(self.device.create_buffer(data))
        return on_device, sizes


def written_buffers(tunables: TunableSet, args: Args, among: Collection[int] | None = None) -> set[int]:
    """The indices of the call's buffers that some stage of some candidate (of ``among``, if
    given) binds ``var<storage, read_write>``: every buffer where the WGSL cannot tell.

    Each candidate's WGSL is reflected for it (once per kernel: ``shader_of``), so ``among``
    keeps a tune to the candidates its plan may run: the page spent 0.3 s in one task on the 92
    of the matmul set at its first tune, of which the plan of that key (128^3) skips 54."""
    every = set(range(len(args.buffers)))
    written: set[int] = set()
    for index, kernel in enumerate(tunables.candidates):
        if among is not None and index not in among:
            continue
        try:
            plan = binding_plan(kernel)
        except KernelError:
            plan = None
        modules = [shader_of(stage) for stage in kernel.stages]
        if plan is None or any(module is None for module in modules):
            return every
        positions = plan[0].candidate.positions
        for module in modules:
            for binding in module.bindings:
                if binding.access != "read_write":
                    continue
                slot = (binding.group, binding.binding)
                if args.names is not None:
                    written.update(i for i, name in enumerate(args.names) if name in (binding.name, slot))
                elif positions is None:
                    return every
                elif slot in positions:
                    written.add(positions[slot])
    return written
