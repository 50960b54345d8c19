"""Candidates made per key on the adapter present: a row softmax whose row length and workgroup
size a Jinja2 template bakes into the source, as runtimes that generate WGSL per shape write it."""

from __future__ import annotations

import jinja2
import numpy as np
import pytest

from wgtune import Args, Config, Key, MemoryStore, Space, TunableSet, Tuner
from wgtune.backends.native import NativeDevice

SOFTMAX = jinja2.Environment(undefined=jinja2.StrictUndefined).from_string("""
// Row softmax, one workgroup per row. Generated per shape: COLS is a constant of the module.
const COLS: u32 = {{ cols }}u;
const WG: u32 = {{ wg }}u;

@group(0) @binding(0) var<storage, read> input: array<f32>;
@group(0) @binding(1) var<storage, read_write> output: array<f32>;

var<workgroup> scratch: array<f32, {{ wg }}>;

@compute @workgroup_size({{ wg }})
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_id) lid: vec3<u32>) {
    let base = wid.x * COLS;
    var m = -3.402823e38;
    for (var c = lid.x; c < COLS; c += WG) { m = max(m, input[base + c]); }
    scratch[lid.x] = m;
    workgroupBarrier();
{%- for stride in strides %}
    if (lid.x < {{ stride }}u) { scratch[lid.x] = max(scratch[lid.x], scratch[lid.x + {{ stride }}u]); }
    workgroupBarrier();
{%- endfor %}
    let row_max = scratch[0];
    workgroupBarrier();
    var sum = 0.0;
    for (var c = lid.x; c < COLS; c += WG) { sum += exp(input[base + c] - row_max); }
    scratch[lid.x] = sum;
    workgroupBarrier();
{%- for stride in strides %}
    if (lid.x < {{ stride }}u) { scratch[lid.x] += scratch[lid.x + {{ stride }}u]; }
    workgroupBarrier();
{%- endfor %}
    let total = scratch[0];
    for (var c = lid.x; c < COLS; c += WG) { output[base + c] = exp(input[base + c] - row_max) / total; }
}
""")


def softmax_candidates(key: dict) -> list:
    """The key's candidates: one per workgroup size, its row length baked in."""

    def render(p: dict) -> str:
        strides = [p["WG"] >> level for level in range(1, p["WG"].bit_length())]
        return SOFTMAX.render(cols=key["cols"], wg=p["WG"], strides=strides)

    return Space("softmax", params={"WG": [32, 64, 128]}, default={"WG": 64}, render=render,
                 grid=lambda p, args: (args.params[0], 1, 1)).candidates()


def softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def make_set() -> TunableSet:
    # The shape travels as params for the key and the grid; the WGSL declares no uniform for it.
    return TunableSet("softmax", softmax_candidates, lambda args: {"rows": args.params[0], "cols": args.params[1]},
                      outputs=(1,), reference=lambda inputs, params: [softmax(
                          np.frombuffer(inputs[0], np.float32).reshape(params[0], params[1]))], atol=1e-6, rtol=1e-4)


@pytest.mark.parametrize("rows, cols", [(8, 100), (3, 257)])
def test_each_shape_is_tuned_with_its_own_source_and_gives_the_softmax(rows, cols):
    device = NativeDevice.open()
    x = np.random.default_rng(cols).uniform(-4, 4, (rows, cols)).astype(np.float32)
    args = Args((device.create_buffer(x.tobytes()), device.create_buffer(size=x.nbytes)), (rows, cols))
    tunables = make_set()
    tuner = Tuner(device, config=Config(cache=False, log_level="disabled", checks=True, samples=3, warmups=1))
    kernel = tuner.execute(tunables, args)
    assert f"const COLS: u32 = {cols}u;" in kernel.wgsl
    out = np.frombuffer(device.read_buffer_sync(args.buffers[1]), np.float32).reshape(rows, cols)
    np.testing.assert_allclose(out, softmax(x), rtol=1e-4, atol=1e-6)
    results = tuner.results(tunables, Key({"rows": rows, "cols": cols}))
    assert [type(r).__name__ for r in results] == ["Measured"] * 3  # every candidate ran and passed the check


def test_a_stored_per_key_winner_is_a_hit_for_its_shape_and_another_shape_tunes_its_own():
    device = NativeDevice.open()
    store = MemoryStore()
    x = np.random.default_rng(0).uniform(-1, 1, (4, 50)).astype(np.float32)
    args = Args((device.create_buffer(x.tobytes()), device.create_buffer(size=x.nbytes)), (4, 50))
    config = Config(log_level="disabled", samples=3, warmups=1)
    first = make_set()
    Tuner(device, store=store, config=config).execute(first, args)
    assert [entry.set_name for entry in store.load()] == ["softmax[cols=50, rows=4]"]
    again = make_set()
    tuner = Tuner(device, store=store, config=config)
    started = []
    tuner.observer = lambda event: started.append(event) if type(event).__name__ == "TuneStarted" else None
    tuner.execute(again, args)
    assert started == []  # the same source for the same shape: the stored winner stands
    y = np.zeros((2, 50), np.float32)
    other = Args((device.create_buffer(y.tobytes()), device.create_buffer(size=y.nbytes)), (2, 50))
    tuner.execute(again, other)
    assert len(started) == 1 and len(store.load()) == 2
    assert again.for_key(Key({"rows": 2, "cols": 50})).checksum == again.for_key(Key({"rows": 4, "cols": 50})).checksum
