"""The output checks' comparison as a compute pass: two buffers in, a few numbers out.

An output check compares a candidate's output with the judge's (``wgtune.tune.checks``). Read back
whole, a 4096 x 4096 f32 output is 64 MiB a candidate, and in the page every read is a copy
through JavaScript; so a WebGPU device compares on the GPU instead. :data:`COMPARE` reduces the
two buffers, element by element as values of the output's type, to eight words: the largest
absolute and relative errors (f32 bits: non-negative floats order as their bits do, so
``atomicMax`` on the bits is a float max), the number of elements beyond tolerance and the index
of the first; its second stage then copies the two words holding that element, so the message
can quote both values. Only those 32 bytes come back. Each invocation reduces its share in
registers and touches the atomics only where it has something to add.

The rule is :func:`wgtune.gpu.comparison.compare_bytes`'s, decided on the bits where a float might
not behave (NaN and infinities: the WGSL spec lets a compiler assume neither occurs, so
``x != x`` is no test). Pure Python and WGSL: it runs natively and in Pyodide alike.
"""

from __future__ import annotations

import struct
from typing import Any

from wgtune.gpu.comparison import Comparison
from wgtune.sets.args import Args
from wgtune.sets.kernel import Kernel

__all__ = ["COMPARE", "GPU_KINDS", "WORKGROUPS_MAX", "compare_on_gpu"]

GPU_KINDS = {"f": 0, "e": 1, "i": 2, "I": 3}
"""The typecodes the pass compares, and how it names them; others are compared on the host."""
WORKGROUP = 256
WORKGROUPS_MAX = 4096
"""Workgroups one comparison dispatches at most; each invocation loops over its share past that."""
PER_INVOCATION = 16
"""Elements each invocation compares at least (fewer invocations, fewer atomics, and on a CPU
adapter fewer invocations to switch between)."""
NO_MISMATCH = 0xFFFFFFFF

_SOURCE = """
struct Compare { count: u32, kind: u32, exact: u32, atol: f32, rtol: f32 }
@group(0) @binding(0) var<storage, read> got: array<u32>;
@group(0) @binding(1) var<storage, read> want: array<u32>;
@group(0) @binding(2) var<storage, read_write> verdict: array<atomic<u32>, 8>;
@group(0) @binding(3) var<uniform> rule: Compare;

const WG = 256u;
const INF_BITS = 0x7f800000u;

// The element's bits, widened to 32: an f16's 16 bits, or the whole word.
fn element_bits(word: u32, i: u32) -> u32 {
    if (rule.kind == 1u) { return (word >> ((i & 1u) * 16u)) & 0xffffu; }
    return word;
}

fn special(bits: u32) -> bool {  // an infinity or a NaN
    if (rule.kind == 1u) { return (bits & 0x7c00u) == 0x7c00u; }
    return (bits & INF_BITS) == INF_BITS;
}

fn is_nan(bits: u32) -> bool {
    if (rule.kind == 1u) { return special(bits) && (bits & 0x3ffu) != 0u; }
    return special(bits) && (bits & 0x7fffffu) != 0u;
}

fn value(word: u32, i: u32) -> f32 {
    switch rule.kind {
        case 0u: { return bitcast<f32>(word); }
        case 1u: { return unpack2x16float(word)[i & 1u]; }
        case 2u: { return f32(bitcast<i32>(word)); }
        default: { return f32(word); }
    }
}

fn word_of(i: u32) -> u32 {
    if (rule.kind == 1u) { return i >> 1u; }
    return i;
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) groups: vec3<u32>) {
    let floats = rule.kind <= 1u;
    var my_abs_bits = 0u;  // f32 bits: a max of the bits is the float max (they are never negative)
    var my_rel_bits = 0u;
    var my_bad = 0u;
    var my_first = 0xffffffffu;
    for (var i = gid.x; i < rule.count; i += groups.x * WG) {
        let g_word = got[word_of(i)];
        let w_word = want[word_of(i)];
        let g_bits = element_bits(g_word, i);
        let w_bits = element_bits(w_word, i);
        if (g_bits == w_bits) { continue; }
        var err = 0.0;
        var ok = false;
        if (floats && (special(g_bits) || special(w_bits))) {
            if (is_nan(g_bits) && is_nan(w_bits)) { continue; }
            my_abs_bits = INF_BITS;  // an infinity or a NaN against anything else
            my_rel_bits = INF_BITS;
        } else {
            var err: f32;
            var size: f32;
            if (floats) {
                err = abs(value(g_word, i) - value(w_word, i));
                size = abs(value(w_word, i));
            } else {  // the distance of two integers, exact in u32 (an f32 loses it past 2^24)
                let above = select(g_word > w_word, bitcast<i32>(g_word) > bitcast<i32>(w_word), rule.kind == 2u);
                err = f32(select(w_word - g_word, g_word - w_word, above));
                size = abs(value(w_word, i));
            }
            my_abs_bits = max(my_abs_bits, bitcast<u32>(err));
            my_rel_bits = max(my_rel_bits, bitcast<u32>(err / max(size, 1.1754944e-38)));
            if (rule.exact == 0u && err <= rule.atol + rule.rtol * size) { continue; }
        }
        my_bad += 1u;
        my_first = min(my_first, i);
    }
    // One atomic per invocation at most, and only where it changes something: no workgroup
    // reduction, whose barriers a CPU adapter (lavapipe, SwiftShader) pays for dearly.
    if (my_abs_bits > atomicLoad(&verdict[0])) { atomicMax(&verdict[0], my_abs_bits); }
    if (my_rel_bits > atomicLoad(&verdict[1])) { atomicMax(&verdict[1], my_rel_bits); }
    if (my_bad != 0u) {
        atomicAdd(&verdict[2], my_bad);
        atomicMin(&verdict[3], my_first);
    }
}

@compute @workgroup_size(1)
fn quote_first() {
    let i = atomicLoad(&verdict[3]);
    if (i < rule.count) {
        atomicStore(&verdict[4], got[word_of(i)]);
        atomicStore(&verdict[5], want[word_of(i)]);
    }
}
"""


def _groups(args: Args) -> tuple[int, int, int]:
    return (max(1, min(WORKGROUPS_MAX, -(-args.params[0] // (WORKGROUP * PER_INVOCATION)))), 1, 1)


COMPARE = Kernel(
    "wgtune.compare", _SOURCE, grid=_groups,
    then=[Kernel("wgtune.compare.quote_first", _SOURCE, grid=lambda _args: (1, 1, 1), entry_point="quote_first")],
)
"""The comparison, as a two-stage kernel any WebGPU device compiles like a candidate."""

_INITIAL = struct.pack("<8I", 0, 0, 0, NO_MISMATCH, 0, 0, 0, 0)


def _element(word: int, index: int, typecode: str) -> float:
    if typecode == "e":
        return struct.unpack("<e", struct.pack("<H", (word >> (16 * (index & 1))) & 0xFFFF))[0]
    return struct.unpack(f"<{typecode}", struct.pack("<I", word))[0]


async def compare_on_gpu(device: Any, compiled: Any, got: Any, want: Any, typecode: str, count: int,
                         atol: float, rtol: float) -> Comparison:
    """The first ``count`` elements of buffers ``got`` and ``want``, as ``typecode`` values (one of
    :data:`GPU_KINDS`), compared on ``device`` with the :data:`COMPARE` pipeline ``compiled``."""
    verdict = device.create_buffer(_INITIAL)
    exact = int(typecode in "iI" and atol == 0 and rtol == 0)
    args = Args({"got": got, "want": want, "verdict": verdict},
                (count, GPU_KINDS[typecode], exact, float(atol), float(rtol)))
    device.dispatch(compiled, args, _groups(args))
    words = struct.unpack("<8I", (await device.read_buffer(verdict))[:32])
    max_abs, max_rel = struct.unpack("<2f", struct.pack("<2I", *words[:2]))
    mismatches, first = words[2], words[3]
    if not mismatches:
        return Comparison(count, 0, max_abs=max_abs, max_rel=max_rel)
    return Comparison(count, mismatches, first, _element(words[4], first, typecode),
                      _element(words[5], first, typecode), max_abs, max_rel)
