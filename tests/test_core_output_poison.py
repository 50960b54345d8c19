"""Which outputs a check may poison (``output_types.output_specs``): those no candidate reads
before it writes them. A candidate of several stages is judged by the first stage that uses the
output, so a split-K kernel whose first stage zeroes C, its next adding into it, starts from
poison and an element it leaves unwritten shows."""

from __future__ import annotations

import pytest
from fakes import FakeDevice, call, kernel, make_set

from wgtune.sets.output_types import candidate_reads_first, output_specs, uses

# Pure core: these also run inside Pyodide (e2e/test_core_in_pyodide.py).
pytestmark = pytest.mark.core

HEAD = "@group(0) @binding(0) var<storage, read> x: array<f32>;\n"

ZERO = """@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = 0.0;
}
"""

ADD = HEAD + """@group(0) @binding(1) var<storage, read_write> out: array<atomic<u32>>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    atomicAdd(&out[id.x], u32(x[id.x]));
}
"""

STORE = HEAD + """@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = x[id.x] * 2.0;
}
"""

SCALE = HEAD + """@group(0) @binding(1) var<storage, read_write> out: array<f32>;
@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    out[id.x] = out[id.x] * x[id.x];
}
"""


def stages(*sources: str) -> object:
    first, *rest = sources
    return kernel(f"k{len(sources)}_{abs(hash(sources)) % 1000}", wgsl=first,
                  then=tuple(kernel(f"stage{i}", wgsl=source) for i, source in enumerate(rest, 1)))


def poisoned(*candidates) -> bool:
    tunables = make_set(*candidates, outputs=("out",))
    [spec] = output_specs(tunables, call(FakeDevice(), [1.0], [0.0]))
    return spec.poison


def test_a_stage_that_only_stores_makes_the_output_written_first():
    assert poisoned(stages(STORE))
    assert not poisoned(stages(SCALE))  # an in-place update reads what the buffer held


def test_a_first_stage_that_zeroes_the_output_lets_later_stages_add_into_it():
    assert not candidate_reads_first(stages(ZERO, ADD), "out")
    assert poisoned(stages(STORE), stages(ZERO, ADD))


def test_adding_into_the_output_before_any_stage_stored_reads_it():
    assert candidate_reads_first(stages(ADD, ZERO), "out")
    assert not poisoned(stages(STORE), stages(ADD))  # one candidate that accumulates is enough


def test_a_stage_that_does_not_use_the_output_does_not_decide():
    skip = HEAD + """@compute @workgroup_size(64) fn main(@builtin(global_invocation_id) id: vec3<u32>) {
    let v = x[id.x];
}
"""
    assert not uses(skip, "out")
    assert candidate_reads_first(stages(skip, SCALE), "out")
    assert not candidate_reads_first(stages(skip, STORE, SCALE), "out")


def test_a_declaration_or_a_comment_is_no_use():
    assert not uses("@group(0) @binding(1) var<storage, read_write> out: array<f32>;\n// out[0] = 1.0;\n", "out")
    assert uses(STORE, "out") and uses(SCALE, "out")
