"""The sets wing: candidates, the sets they are tuned in, and how a call reaches a kernel.

``tunable`` (Kernel, TunableSet), a call's inputs (``args``, ``buffer_names``), what a
candidate's WGSL says of it (``shaders``, ``bindings``, ``uniforms``, ``output_types``), and
parameter spaces (``space``). Built on the WGSL and search wings; knows no device.
"""
