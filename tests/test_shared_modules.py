"""One compile per distinct stage code (``backends/shared_modules.py``), on a fake compiler that names
the stage it compiles in its errors, as Dawn's and the browser's do (a pipeline's label, or
``name:line:col``): stages of one code share a pipeline, and a failed compile's message names a
stage that asked for it, never one of another set compiled earlier from the same code.
Pure core (a fake compiler), so these run in Pyodide too; the same on Dawn's Null backend is in
``test_shared_modules_dawn.py``."""

from __future__ import annotations

from typing import Any

import pytest

from wgtune import Kernel, KernelError, run_inline
from wgtune.backends.shared_modules import SharedModules


class NamingShim:
    """Compiles each kernel ``sent`` to it to ``("pipeline:<name>", "layout:<name>")``, or, where its
    override ``WG`` is 0, fails with an error that names it. Compiles begun ahead (``start_compiles``)
    are sent at once and taken by the next compile of that kernel, as ``WgpuShim`` takes them."""

    def __init__(self) -> None:
        self.sent: list[str] = []
        self.begun: dict[int, tuple[Any, Any] | KernelError] = {}
        self.dropped: list[str] = []

    def _compile(self, kernel: Kernel) -> tuple[Any, Any] | KernelError:
        self.sent.append(kernel.name)
        if kernel.constants.get("WG") == 0:
            return KernelError(f"{kernel.name}:7:1: error: @workgroup_size values must be greater than 0")
        return f"pipeline:{kernel.name}", f"layout:{kernel.name}"

    async def compile_module(self, kernel: Kernel) -> tuple[Any, Any]:
        answer = self.begun.pop(id(kernel)) if id(kernel) in self.begun else self._compile(kernel)
        if isinstance(answer, KernelError):
            raise answer
        return answer

    async def compile_modules(self, kernels: list[Kernel]) -> list[tuple[Any, Any] | Exception]:
        answers: list[tuple[Any, Any] | Exception] = []
        for kernel in kernels:
            try:
                answers.append(await self.compile_module(kernel))
            except KernelError as error:
                answers.append(error)
        return answers

    def start_compiles(self, kernels: list[Kernel]) -> None:
        for kernel in kernels:
            self.begun[id(kernel)] = self._compile(kernel)

    def drop_started(self, kernels: list[Kernel]) -> None:
        for kernel in kernels:
            if self.begun.pop(id(kernel), None) is not None:
                self.dropped.append(kernel.name)


SOURCE = "override WG: u32 = 64;\n@compute @workgroup_size(WG) fn main() {}"


def stage(name: str, wg: int) -> Kernel:
    return Kernel(name, SOURCE, grid=lambda args: (1, 1, 1), constants={"WG": wg})


@pytest.mark.core
def test_stages_of_one_code_share_the_first_ones_pipeline():
    shim = NamingShim()
    modules = SharedModules(shim)  # type: ignore[arg-type]
    first = run_inline(modules.compile(stage("alpha[WG=64]", 64)))
    assert run_inline(modules.compile_many([stage("beta[WG=64]", 64)])) == [first]
    assert run_inline(modules.compile(stage("gamma[WG=64]", 64))) is first
    assert shim.sent == ["alpha[WG=64]"]


@pytest.mark.core
def test_a_later_failed_compile_of_a_code_names_the_stage_that_asked_not_the_one_that_failed_first():
    shim = NamingShim()
    modules = SharedModules(shim)  # type: ignore[arg-type]
    [alpha] = run_inline(modules.compile_many([stage("alpha[WG=0]", 0)]))  # one set's tune...
    [beta] = run_inline(modules.compile_many([stage("beta[WG=0]", 0)]))  # ... then another's, of the same code
    assert "alpha[WG=0]" in str(alpha)
    assert isinstance(beta, KernelError) and "beta[WG=0]" in str(beta) and "alpha" not in str(beta)
    with pytest.raises(KernelError) as single:
        run_inline(modules.compile(stage("gamma[WG=0]", 0)))
    assert "gamma[WG=0]" in str(single.value) and "alpha" not in str(single.value)
    assert shim.sent == ["alpha[WG=0]", "beta[WG=0]", "gamma[WG=0]"]  # failures are not kept: asked again


@pytest.mark.core
def test_a_failed_compile_begun_ahead_for_another_stage_is_asked_again_for_the_stage_that_asks():
    shim = NamingShim()
    modules = SharedModules(shim)  # type: ignore[arg-type]
    modules.start([stage("alpha[WG=0]", 0)])  # begun for a tune that ended before it needed it
    [beta] = run_inline(modules.compile_many([stage("beta[WG=0]", 0), stage("beta[WG=64]", 64)]))[:1]
    assert isinstance(beta, KernelError) and "beta[WG=0]" in str(beta) and "alpha" not in str(beta)
    modules.start([stage("alpha2[WG=0]", 0)])
    with pytest.raises(KernelError) as single:
        run_inline(modules.compile(stage("gamma[WG=0]", 0)))
    assert "gamma[WG=0]" in str(single.value) and "alpha" not in str(single.value)
    # A begun compile that succeeded is taken by whichever stage asks: nothing compiled twice.
    modules.start([stage("alpha[WG=32]", 32)])
    assert run_inline(modules.compile(stage("beta[WG=32]", 32))) == ("pipeline:alpha[WG=32]", "layout:alpha[WG=32]")
    assert shim.sent == ["alpha[WG=0]", "beta[WG=64]", "beta[WG=0]", "alpha2[WG=0]", "gamma[WG=0]", "alpha[WG=32]"]


@pytest.mark.core
def test_stages_of_one_failing_code_in_one_compile_get_its_one_error():
    shim = NamingShim()
    modules = SharedModules(shim)  # type: ignore[arg-type]
    first, second = run_inline(modules.compile_many([stage("beta[WG=0]", 0), stage("beta_too[WG=0]", 0)]))
    assert isinstance(first, KernelError) and second is first
    assert shim.sent == ["beta[WG=0]"]


@pytest.mark.core
def test_begun_compiles_no_longer_wanted_are_let_go_but_not_a_code_that_a_kept_stage_has():
    shim = NamingShim()
    modules = SharedModules(shim)  # type: ignore[arg-type]
    # Two finalists with a first stage of one code (zeroing the output, say) and a stage of their own each.
    loser_zero, loser, winner_zero, winner = stage("loser-zero", 8), stage("loser", 16), stage("winner-zero", 8), \
        stage("winner", 32)
    modules.start([loser_zero, loser, winner_zero, winner])
    assert shim.sent == ["loser-zero", "loser", "winner"]  # the shared code begun once
    modules.drop_started([loser_zero, loser], keep=[winner_zero, winner])
    assert shim.dropped == ["loser"]  # the shared code is the winner's too: still begun
    assert run_inline(modules.compile_many([winner_zero, winner])) == [
        ("pipeline:loser-zero", "layout:loser-zero"), ("pipeline:winner", "layout:winner")]
    assert shim.sent == ["loser-zero", "loser", "winner"]  # both taken, nothing compiled again
    # The dropped code compiles afresh, in the name of the stage that asks now.
    assert run_inline(modules.compile(stage("later", 16))) == ("pipeline:later", "layout:later")
    # A compiled code is no begun compile: nothing to let go.
    modules.drop_started([winner_zero, winner])
    assert shim.dropped == ["loser"] and shim.sent == ["loser-zero", "loser", "winner", "later"]
