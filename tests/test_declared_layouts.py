"""Stages with ``layout="declared"`` (``Kernel.layout``): one bind group layout of every buffer the
WGSL declares, so that a candidate's stages that declare the same bindings share one bind group,
set once a launch, on the adapter present (lavapipe without a GPU)."""

from __future__ import annotations

import struct
from collections import Counter
from dataclasses import replace

import pytest
from dawn_null import dawn_null_report

from wgtune import Args, Config, Kernel, Measured, NoValidKernelFound, TunableSet, Tuner
from wgtune.backends.native import NativeDevice
from wgtune.errors import ConfigError, KernelError
from wgtune.sets.bindings import declared_layout

N = 2053  # elements: not a whole number of workgroups

# Both stages declare x, y, tmp (scratch) and the params; the first doubles x into tmp, the second
# writes y = tmp + b. BODY and PARAMS say what each stage does and which params it reads.
STAGE = """
struct Params { n: u32, b: f32 PARAMS }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> y: array<f32>;
@group(0) @binding(2) var<uniform> p: Params;
@group(0) @binding(3) var<storage, read_write> tmp: array<f32>;
@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) g: vec3<u32>) { if (g.x < p.n) { BODY; } }
"""
DOUBLE = "tmp[g.x] = 2.0 * x[g.x]"
ADD = "y[g.x] = tmp[g.x] + p.b"


def grid(args: Args) -> tuple[int, int, int]:
    return (-(-args.params[0] // 64), 1, 1)


def two_stages(name: str, layout: str, own_params: bool = False, wg: int = 64) -> Kernel:
    """The two-stage candidate (``wg`` invocations a workgroup); with ``own_params`` the second
    stage packs a params struct of its own (another uniform buffer, so a bind group of its own)."""
    def blocks(args: Args) -> tuple[int, int, int]:
        return (-(-args.params[0] // wg), 1, 1)

    source = STAGE.replace("WG", str(wg))
    second = source.replace("BODY", ADD).replace("PARAMS", ", extra: u32" if own_params else "")
    then = Kernel(f"{name}_add", second, grid=blocks, layout=layout,
                  params=(lambda args: (*args.params, 7)) if own_params else None)
    return Kernel(name, source.replace("BODY", DOUBLE).replace("PARAMS", ""), grid=blocks, then=(then,),
                  scratch={"tmp": lambda args: 4 * args.params[0]}, layout=layout)


@pytest.fixture(scope="module")
def device() -> NativeDevice:
    return NativeDevice.open()


def counted(device: NativeDevice) -> Counter:
    """Count the pass commands the device records from now on (each still goes to the pass)."""
    counts: Counter = Counter()
    originals = device._pass_commands

    def counting(name, command):
        def call(*args):
            counts[name] += 1
            return command(*args)
        return call

    device._pass_commands = tuple(counting(name, command) for name, command in
                                  zip(("set_pipeline", "set_bind_group", "dispatch"), originals, strict=True))
    return counts


def test_a_kernel_is_auto_or_declared_and_declared_is_part_of_its_identity():
    auto, declared = two_stages("s", "auto"), two_stages("s", "declared")
    assert auto.fingerprint() != declared.fingerprint()
    assert "layout" not in auto.fingerprint()  # kernels that leave it keep their checksums
    with pytest.raises(ConfigError, match="layout must be one of 'auto', 'declared', got 'explicit'"):
        Kernel("k", STAGE.replace("WG", "64"), grid=grid, layout="explicit")


def test_the_declared_layout_is_every_buffer_in_group_zero_used_or_not():
    stage = two_stages("s", "declared")
    assert declared_layout(stage) == ((0, "read-only-storage"), (1, "storage"), (2, "uniform"), (3, "storage"))
    assert declared_layout(stage) == declared_layout(stage.then[0])  # y unused in one, x in the other
    elsewhere = STAGE.replace("WG", "64").replace("BODY", DOUBLE)
    elsewhere = elsewhere.replace("@group(0) @binding(3)", "@group(1) @binding(0)")
    with pytest.raises(KernelError, match=r"group 0 only, and the WGSL declares tmp \(@group\(1\) @binding\(0\)\)"):
        declared_layout(Kernel("elsewhere", elsewhere.replace("PARAMS", ""), grid=grid, layout="declared"))
    texture = "@group(0) @binding(0) var t: texture_2d<f32>;\n@compute @workgroup_size(1) fn main() {}\n"
    with pytest.raises(KernelError, match=r"declares t \(@group\(0\) @binding\(0\), not a buffer\)"):
        declared_layout(Kernel("texture", texture, grid=grid, layout="declared"))


@pytest.mark.parametrize(("layout", "own_params", "groups_a_launch"),
                         [("declared", False, 0), ("auto", False, 2), ("declared", True, 2)],
                         ids=["declared", "auto", "declared-own-params"])
def test_stages_that_bind_alike_share_one_bind_group_set_once_a_pass(device, layout, own_params, groups_a_launch):
    """A batch of launches of a two-stage candidate: the stages take turns in the pipeline, and
    with declared layouts and the same buffers and params the one bind group stays set (set once,
    by the pass's first launch); otherwise each stage sets its own each launch. The output is right
    in each case, the same buffers from the first launch to the last."""
    name = f"twice_{layout}_{own_params}"
    tunables = TunableSet(name, [two_stages(f"{name}_{wg}", layout, own_params, wg) for wg in (64, 128)],
                          key=lambda args: {"n": args.params[0]})
    x = device.create_buffer(struct.pack(f"{N}f", *range(N)))
    y = device.create_buffer(struct.pack(f"{N}f", *[float("nan")] * N))
    args = Args({"x": x, "y": y}, (N, 0.5))
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=True, samples=3, warmups=1))
    tuner.execute(tunables, args)  # tuned (checked) and launched once: the call's bind groups made
    assert all(isinstance(r, Measured) for r in tuner.results(tunables, tuner.key(tunables, args)))
    commands = device._pass_commands
    counts = counted(device)
    launches = 6
    try:
        with tuner.batch():
            for _ in range(launches):
                tuner.execute(tunables, args)
    finally:
        device._pass_commands = commands
    assert counts["dispatch"] == 2 * launches and counts["set_pipeline"] == 2 * launches
    assert counts["set_bind_group"] == (1 if groups_a_launch == 0 else groups_a_launch * launches)
    assert list(struct.unpack(f"{N}f", device.read_buffer_sync(y))) == [2.0 * i + 0.5 for i in range(N)]


# Dawn validates a pipeline's explicit layout against its shader (a read binding must be
# read-only-storage, every binding the shader uses must be in the layout) and each dispatch's bind
# groups against its pipeline, as a browser does; its Null backend validates and runs nothing.
DECLARED_ON_DAWN = r"""
import json

from wgtune import run_inline
from wgtune.backends.dawn import DawnDevice
from wgtune.gpu.device import check_limits
from wgtune.kernels.matmul import matmul_set
from wgtune.kernels.matmul.references import make_matmul_args

device = DawnDevice.open()
report = {"launched": [], "failed": {}, "skipped": []}
args = make_matmul_args(device, (67, 45, 3000))
for kernel in matmul_set().candidates:
    if len(kernel.stages) < 2 or kernel.layout != "declared":
        continue
    if check_limits(kernel, device.limits, frozenset(device.features)):  # as a tune refuses it
        report["skipped"].append(kernel.name)
        continue
    try:
        compiled = run_inline(device.compile(kernel))
        for _ in range(3):
            device.launch(compiled, args, kernel.grid(args))
        run_inline(device.sync())
        report["launched"].append(kernel.name)
    except Exception as error:
        report["failed"][kernel.name] = f"{type(error).__name__}: {error}"[:600]
print("REPORT " + json.dumps(report))
"""


def test_dawn_takes_the_declared_layouts_of_the_split_k_candidates_and_their_shared_bind_groups():
    """Every split-K matmul candidate that fits Dawn's device (no float atomics, WebGPU's default
    limits: two-pass ones and those adding with compare-exchange, as a browser tunes them)
    compiles with its declared layout and launches three times on one call's buffers with no
    validation error."""
    report = dawn_null_report(DECLARED_ON_DAWN)
    assert report["failed"] == {}
    assert any(name.endswith("_2p") for name in report["launched"]), report
    assert any(name.endswith("_st8") for name in report["launched"]), report  # adds with compare-exchange
    assert len(report["launched"]) >= 8, report


def test_a_declared_uniform_without_params_to_fill_it_fails_the_candidate_naming_the_binding(device):
    fixed = [replace(kernel, grid=lambda args: (1, 1, 1), then=(replace(kernel.then[0], grid=lambda args: (1, 1, 1)),))
             for kernel in (two_stages(f"no_params_{wg}", "declared", wg=wg) for wg in (64, 128))]
    tunables = TunableSet("declared_no_params", fixed, key=lambda args: {"n": 1})
    x, y = device.create_buffer(struct.pack("4f", 1, 2, 3, 4)), device.create_buffer(size=16)
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=False, samples=3, warmups=1))
    with pytest.raises(NoValidKernelFound) as failed:
        tuner.execute(tunables, Args({"x": x, "y": y}, ()))
    assert str(failed.value).count("declares the uniform at @group(0) @binding(2) and layout='declared' binds every "
                                   "declared buffer, but the call has no params to fill it") == 2, str(failed.value)
