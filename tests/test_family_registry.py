"""The kernel family registry: a family added with one line is picked up by the demo suite, the
farm's catalogues, the collector and the bench listing, with no other edit; a name the registry
does not have is an error naming the ones it has."""

from __future__ import annotations

import json
import sys
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from wgtune import Args, Config, Kernel, LogLevel, TunableSet, anchor
from wgtune.backends.collector import known_sets
from wgtune.errors import ConfigError
from wgtune.kernels import FAMILIES, Family, demo_suite, family_named, family_names, register
from wgtune.kernels.inputs import random_floats

KNOWN = "sets: matmul, matmul_f16, fma, row_sum, row_max"

# -- a family of its own: out[i] = 2 * x[i], the whole of what a new family module holds ---------------


def double_wgsl(workgroup: int) -> str:
    return f"""\
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read_write> out: array<f32>;
struct Params {{ n: u32 }}
@group(0) @binding(2) var<uniform> p: Params;

@compute @workgroup_size({workgroup}, 1, 1)
fn main(@builtin(global_invocation_id) id: vec3<u32>) {{
  if (id.x < p.n) {{ out[id.x] = 2.0 * x[id.x]; }}
}}
"""


def double_kernel(workgroup: int) -> Kernel:
    def grid(args: Args) -> tuple[int, int, int]:
        return (-(-args.params[0] // workgroup), 1, 1)

    return Kernel(f"double_wg{workgroup}", double_wgsl(workgroup), grid=grid, workgroup_size=(workgroup, 1, 1))


def double_set() -> TunableSet:
    return TunableSet("double", [double_kernel(64), double_kernel(256)], key=lambda args: {"n": anchor(args.params[0])},
                      outputs=(1,), atol=0.0, rtol=0.0)


def make_double_args(device: Any, size: tuple[int, ...]) -> Args:
    (n,) = size
    x = random_floats(n, seed=f"double-{n}")
    return Args((device.create_buffer(x.tobytes()), device.create_buffer(size=4 * n)), (n,))


def double_reference(inputs: Sequence[Sequence[float]], params: tuple) -> list[float]:
    return [2.0 * value for value in inputs[0]]


DOUBLE = Family(name="double", build=double_set, dims=("N",), make_args=make_double_args, reference=double_reference,
                demo_sizes=((4096,), (1000,)))


@pytest.fixture
def double():
    """The registry with DOUBLE added by its one line, as it was again afterwards."""
    before = list(FAMILIES)
    register(DOUBLE)
    yield DOUBLE
    FAMILIES[:] = before


def bench_kernels():
    """``bench/kernels.py`` (bench/ is no package)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
    try:
        import kernels
    finally:
        sys.path.pop(0)
    return kernels


# -- picked up everywhere ------------------------------------------------------------------------


def test_the_registry_holds_the_shipped_families_in_order():
    assert family_names() == ["matmul", "matmul_f16", "fma", "row_sum", "row_max"]
    assert [family.build().name for family in FAMILIES] == family_names()
    assert [case.tunables.name for case in demo_suite()] == ["matmul", "fma", "row_sum", "row_max"]


def test_a_registered_family_joins_the_demo_suite_after_the_others(double):
    cases = demo_suite()
    assert [case.tunables.name for case in cases] == ["matmul", "fma", "row_sum", "row_max", "double"]
    assert cases[-1].sizes == ((4096,), (1000,)) and cases[-1].make_args is make_double_args


def test_a_farm_catalogue_may_name_a_registered_family_and_plans_its_keys(double):
    farm = pytest.importorskip("wgtune.backends.farm", reason="the farm extra: pip install -e '.[farm]'")
    jobs = farm.parse_catalogue({"double": [[4096], [4000], [1000]], "fma": [[1024]]})
    assert [(job.set_name, job.size, job.key.as_dict()) for job in jobs] == [
        ("double", (4096,), {"n": 4096}), ("double", (1000,), {"n": 1024}),  # 4000 shares 4096's key
        ("fma", (1024,), {"dtype": "f32", "n": 1024, "vec": 4}),
    ]
    assert [job.size for job in farm.default_catalogue(["double"])] == [(4096,), (1000,)]
    assert {"double"} < {job.set_name for job in farm.default_catalogue()}
    with pytest.raises(ConfigError, match=r"shapes.json: double\[0\]: expected \[N\], got \[1, 2\]"):
        farm.parse_catalogue({"double": [[1, 2]]}, "shapes.json")


def test_the_collector_accepts_reports_of_a_registered_family(double):
    known = known_sets()
    assert known["double"].checksum == double_set().checksum
    assert known["double"].candidates == ("double_wg64", "double_wg256")


def test_the_bench_lists_a_registered_family_from_its_record(double, capsys):
    kernels = bench_kernels()
    found = [w for w in kernels.workloads(full=False) if w.family == "double"]
    assert [(w.label, w.unit, w.work) for w in found] == [("4096", "GB/s", 8.0 * 4096), ("1000", "GB/s", 8.0 * 1000)]
    assert kernels.main(["--list", "--only", "double"]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert len(listed) == 2 and all(line.split()[0] == "double" for line in listed)


def test_a_registered_family_tunes_from_its_record_alone_on_a_farm_worker_and_in_the_bench(double):
    """On the adapter (lavapipe in CI): the farm worker's job and the bench's check use nothing but
    the record (its make_args, its params for the key, its reference)."""
    farm_worker = pytest.importorskip("wgtune.backends.farm_worker", reason="the farm extra")
    quick = Config(samples=3, warmups=1, log_level=LogLevel.DISABLED)
    answer = farm_worker.tune_job(farm_worker.FarmJob.plan("double", (1000,)), quick)
    assert answer["error"] is None
    entry = json.loads(answer["entry"])
    assert (entry["table"], entry["key"]) == ("double", {"n": 1024})

    kernels = bench_kernels()
    from wgtune.backends.native import NativeDevice

    (workload,) = [w for w in kernels.workloads(full=False) if w.family == "double" and w.label == "1000"]
    tuned = kernels.tune(workload, NativeDevice.open(), Config(samples=3, warmups=1, cache=False,
                                                               log_level=LogLevel.DISABLED))
    assert tuned.error == 0.0 and tuned.want.size == 1000
    assert list(tuned.want[:3]) == [2.0 * v for v in array("f", random_floats(3, seed="double-1000"))]


# -- names the registry does not have ----------------------------------------------------------------


def test_a_catalogue_naming_an_unknown_family_fails_naming_the_known_ones():
    farm = pytest.importorskip("wgtune.backends.farm", reason="the farm extra: pip install -e '.[farm]'")
    with pytest.raises(ConfigError) as raised:
        farm.parse_catalogue({"fma": [[1024]], "conv2d": [[3, 3]]}, "shapes.json")
    assert str(raised.value) == f"shapes.json: unknown set 'conv2d'; {KNOWN}"
    with pytest.raises(ConfigError, match=f"unknown set\\(s\\) conv2d; {KNOWN}"):
        farm.default_catalogue(["conv2d"])
    with pytest.raises(ConfigError, match=f"unknown set 'conv2d'; {KNOWN}"):
        farm.plan_jobs([("conv2d", (3, 3))])


def test_the_registry_names_the_known_families_for_an_unknown_one_and_refuses_a_second_of_a_name():
    with pytest.raises(ConfigError, match=f"^--only: unknown set 'conv2d'; {KNOWN}$"):
        family_named("conv2d", "--only")
    with pytest.raises(ConfigError, match="a family named 'fma' is registered already"):
        register(Family(name="fma", build=double_set, dims=("N",), make_args=make_double_args,
                        reference=double_reference))
    assert family_names() == ["matmul", "matmul_f16", "fma", "row_sum", "row_max"]


@pytest.mark.parametrize(("fields", "problem"), [
    ({"dims": ()}, "dims must name each number of a size"),
    ({"demo_sizes": ((0,),)}, r"family double: demo_sizes\[0\]: N must be a positive integer, got 0"),
    ({"demo_sizes": ((4, 4),)}, r"family double: demo_sizes\[0\]: expected \[N\], got \[4, 4\]"),
    ({"element": "f64"}, "element 'f64' is not one of f32, f16"),
])
def test_a_family_record_is_checked_when_it_is_made(fields, problem):
    with pytest.raises(ConfigError, match=problem):
        Family(**{"name": "double", "build": double_set, "dims": ("N",), "make_args": make_double_args,
                  "reference": double_reference, **fields})
