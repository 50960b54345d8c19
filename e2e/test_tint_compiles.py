"""Every built-in candidate's WGSL, and the wake's spin kernel, passes Tint (Chromium's WGSL
compiler) as well as naga (wgpu-native's, which the native tests use): the two differ (Tint
enforces ``enable subgroups;`` and WGSL's uniformity rules for subgroup operations, naga refused
the directive), and a candidate only one of them takes is a candidate the page would lose. Each
distinct source is checked by ``createShaderModule`` and its compilation messages, on a device
with every feature the adapter has; a candidate needing a feature the adapter lacks (wgpu-native's
float atomics, the subgroup matrices) is not Tint's to take, and is counted, not checked."""

from __future__ import annotations

from wgtune.gpu.wake import SPIN_KERNEL
from wgtune.kernels.families import FAMILIES

CHECK = """async (sources) => {
  const adapter = await navigator.gpu.requestAdapter();
  const features = [...adapter.features];
  const device = await adapter.requestDevice({requiredFeatures: features});
  const found = {};
  for (const [name, code] of Object.entries(sources)) {
    device.pushErrorScope('validation');
    const module = device.createShaderModule({code});
    const info = await module.getCompilationInfo();
    const error = await device.popErrorScope();
    const said = info.messages.filter(m => m.type !== 'info').map(m => `${m.type} ${m.lineNum}: ${m.message}`);
    if (error) said.push(error.message);
    if (said.length) found[name] = said.slice(0, 3);
  }
  return {features, found};
}"""


def test_every_built_in_candidate_and_the_spin_kernel_pass_tint(browser):
    stages: dict[str, tuple[str, frozenset[str]]] = {"wake:" + SPIN_KERNEL.name: (SPIN_KERNEL.wgsl, frozenset())}
    for family in FAMILIES:
        for kernel in family.build().candidates:
            for stage in kernel.stages:
                stages.setdefault(f"{family.name}:{stage.name}", (stage.wgsl, frozenset(kernel.features)))
    page = browser.context.new_page()
    try:
        page.goto(browser.url + "no-such-page")  # a page of the server: a secure context, no Python loaded
        features = set(page.evaluate("async () => [...(await navigator.gpu.requestAdapter()).features]"))
        checked = {name: wgsl for name, (wgsl, needs) in stages.items() if needs <= features}
        distinct = {wgsl: name for name, wgsl in checked.items()}  # one check a source
        answer = page.evaluate(CHECK, {name: wgsl for wgsl, name in distinct.items()})
    finally:
        page.close()
    assert answer["found"] == {}, answer["found"]
    assert "subgroups" in features  # so the subgroup candidates were checked, not skipped
    assert len(checked) > 250 and any(name.startswith("row_sum:subgroup_") for name in checked)
    skipped = {name for name in stages if name not in checked}
    assert all(name.startswith(("matmul:", "matmul_f16:")) for name in skipped), skipped  # features Chrome lacks


def test_a_source_tint_refuses_is_reported(browser):
    # The check is real: a subgroup operation under a condition that differs between invocations
    # breaks WGSL's uniformity rules, which naga does not enforce.
    bad = SPIN_KERNEL.wgsl.replace("if (x == -1.0) {", "if (x == -1.0) {\n        let s = subgroupAdd(x);")
    bad = "enable subgroups;\n" + bad.replace("sink[0] = x;", "sink[0] = s;")
    page = browser.context.new_page()
    try:
        page.goto(browser.url + "no-such-page")
        answer = page.evaluate(CHECK, {"non-uniform": bad})
    finally:
        page.close()
    assert "non-uniform" in answer["found"], answer
    assert any("uniform" in message for message in answer["found"]["non-uniform"])
